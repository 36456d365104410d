/**
 * The userspace mode's UDP proxying: per client address a session with its own socket to the
 * endpoint the balancer picked (ClientIP affinity included), replies relayed back, sessions ended
 * when idle or when their endpoint goes away.
 * @module
 */
import type { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { IPFamily } from "../model/types.ts";
import { DatagramSender } from "./datagram_sender.ts";
import { splitEndpoint } from "./dial.ts";
import { AcceptRetry, type Admit, type ServingEvents } from "./tcp_serve.ts";

/** Largest UDP payload (IPv4); every datagram fits the receive buffer whole. */
const MAX_DATAGRAM = 65507;

interface UdpSession {
  readonly endpoint: string;
  readonly backend: Deno.DatagramConn;
  /** Sends to the endpoint from the session's own socket. */
  readonly toEndpoint: DatagramSender;
  readonly endpointAddr: Deno.NetAddr;
  lastUsed: number;
  close(): void;
}

/** Options of {@linkcode UdpServing}. */
export interface UdpServingOptions {
  readonly balancer: RoundRobinBalancer;
  readonly events: ServingEvents;
  readonly clock: Clock;
  readonly log: Logger;
  /** The family of the sessions' sockets. */
  readonly family: IPFamily;
  /** A session idle this long ends (`--udp-timeout`). */
  readonly idleTimeoutMs: number;
}

/** Serves the UDP service ports of one proxier; see the module doc. */
export class UdpServing {
  readonly #o: UdpServingOptions;
  /** Per service port: its live sessions. */
  readonly #sessions = new Map<string, Set<UdpSession>>();

  /** Keeps the options; serves nothing until {@linkcode serve}. */
  constructor(o: UdpServingOptions) {
    this.#o = o;
  }

  /**
   * Serves one UDP listening socket of service port `key` until `listening()` turns false: each
   * client address gets a session (its own socket to the endpoint the balancer picks), which
   * ends after the idle timeout.
   */
  async serve(
    sock: Deno.DatagramConn,
    key: string,
    listening: () => boolean,
    admit?: Admit,
  ): Promise<void> {
    const sessions = new Map<string, UdpSession>();
    const retry = new AcceptRetry(key, this.#o.events);
    // One buffer for every receive: each datagram is copied out (its own size) before the next.
    const buf = new Uint8Array(MAX_DATAGRAM);
    const toClients = new DatagramSender(
      sock,
      (e) => this.#o.log.debug("UDP send to client failed", { error: e.message }),
    );
    try {
      for (;;) {
        let received: [Uint8Array, Deno.Addr];
        try {
          received = await sock.receive(buf);
        } catch (e) {
          // Only our close ends the loop; anything else (fd limit...) is waited out.
          if (!listening()) return;
          await retry.failed(e);
          if (!listening()) return;
          continue;
        }
        retry.succeeded();
        const [data, addr] = received;
        const client = addr as Deno.NetAddr;
        const ck = `${client.hostname}|${client.port}`;
        let s = sessions.get(ck);
        if (s === undefined && admit !== undefined && !admit(client.hostname)) {
          // Outside the port's source ranges: the datagram is dropped, as the kernel modes drop it.
          this.#o.events.refused?.(key, client.hostname);
          continue;
        }
        if (s === undefined) {
          s = this.#newSession(toClients, client, key, () => sessions.delete(ck));
          if (s === undefined) continue;
          sessions.set(ck, s);
        }
        s.lastUsed = this.#o.clock.now();
        const wait = s.toEndpoint.send(data.slice(), s.endpointAddr);
        if (wait !== undefined) await wait;
      }
    } catch {
      // The socket was closed.
    } finally {
      for (const s of sessions.values()) s.close();
    }
  }

  #newSession(
    toClients: DatagramSender,
    client: Deno.NetAddr,
    key: string,
    forget: () => void,
  ): UdpSession | undefined {
    const endpoint = this.#o.balancer.next(key, client.hostname);
    if (endpoint === undefined) return undefined;
    const backend = Deno.listenDatagram({
      transport: "udp",
      hostname: this.#o.family === "IPv4" ? "0.0.0.0" : "::",
      port: 0,
    });
    let cancelTimer = () => {};
    const session: UdpSession = {
      endpoint,
      backend,
      toEndpoint: new DatagramSender(
        backend,
        (e) => this.#o.log.debug("UDP send to endpoint failed", { endpoint, error: e.message }),
      ),
      endpointAddr: { transport: "udp", ...splitEndpoint(endpoint) },
      lastUsed: this.#o.clock.now(),
      close: () => {
        cancelTimer();
        forget();
        this.#sessions.get(key)?.delete(session);
        try {
          backend.close();
        } catch { /* already closed */ }
      },
    };
    let set = this.#sessions.get(key);
    if (set === undefined) this.#sessions.set(key, set = new Set());
    set.add(session);
    const expire = () => {
      const idle = this.#o.clock.now() - session.lastUsed;
      if (idle >= this.#o.idleTimeoutMs) session.close();
      else cancelTimer = this.#o.clock.setTimer(expire, this.#o.idleTimeoutMs - idle);
    };
    cancelTimer = this.#o.clock.setTimer(expire, this.#o.idleTimeoutMs);
    (async () => {
      const buf = new Uint8Array(MAX_DATAGRAM);
      try {
        for (;;) {
          const [reply] = await backend.receive(buf);
          session.lastUsed = this.#o.clock.now();
          const wait = toClients.send(reply.slice(), client);
          if (wait !== undefined) await wait;
        }
      } catch {
        // Session closed or the service socket went away.
      }
    })();
    return session;
  }

  /** Ends UDP sessions pinned to endpoints that are gone, so the next datagram picks a live one. */
  dropSessionsNotIn(key: string, live: ReadonlySet<string>): void {
    for (const s of [...(this.#sessions.get(key) ?? [])]) {
      if (!live.has(s.endpoint)) s.close();
    }
  }
}
