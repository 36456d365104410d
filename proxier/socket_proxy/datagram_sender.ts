/**
 * Pipelined datagram sends: the receive loop that forwards a datagram does not wait for its send
 * before receiving the next one (waiting for each send halves what one loop can forward), yet
 * the sends in flight stay bounded.
 * @module
 */

/** Sends on one datagram socket with at most `maxInFlight` sends pending. */
export class DatagramSender {
  #inFlight = 0;
  readonly #waiters: Array<() => void> = [];

  /**
   * @param sock the socket sent on
   * @param onError called with each failed send (the datagram is lost, as the kernel would drop it)
   * @param maxInFlight sends pending before {@linkcode send} asks its caller to wait
   */
  constructor(
    readonly sock: Deno.DatagramConn,
    readonly onError: (e: Error) => void,
    readonly maxInFlight = 256,
  ) {}

  /**
   * Starts sending `data` (the caller must not reuse it) to `to`. Returns undefined when the
   * caller may go on at once, or a promise that resolves once a pending send finished.
   */
  send(data: Uint8Array, to: Deno.NetAddr): Promise<void> | undefined {
    this.#inFlight++;
    this.sock.send(data, to).then(undefined, this.onError).finally(() => {
      this.#inFlight--;
      this.#waiters.shift()?.();
    });
    if (this.#inFlight < this.maxInFlight) return undefined;
    return new Promise((r) => this.#waiters.push(r));
  }
}
