/**
 * Keeping the health and metrics servers up as upstream does (`--bind-address-hard-fail`): a server
 * that cannot bind (the port taken, the address not yet on the node) is retried every 5 s while the
 * proxy goes on, or, with hard fail, ends the process.
 * @module
 */
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { onAbort } from "../runtime/abort.ts";

/** Upstream retries a failed health or metrics server every 5 s (`wait.Until`). */
export const LISTEN_RETRY_MS = 5000;

/** A server that cannot bind while hard fail is set. */
export class ListenError extends Error {
  /** @param address `host:port` that could not be bound. */
  constructor(readonly server: string, readonly address: string, options?: ErrorOptions) {
    super(`${server} server cannot listen on ${address}: ${(options?.cause as Error)?.message}`, options);
    this.name = "ListenError";
  }
}

/** What {@linkcode keepListening} needs. */
export interface ListenOptions {
  /** "Healthz" or "Metrics", for the log. */
  readonly server: string;
  readonly address: { hostname: string; port: number };
  /** Starts the server; throws when it cannot bind. */
  readonly start: () => Deno.HttpServer;
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly clock: Clock;
  readonly hardFail: boolean;
  readonly retryMs?: number;
  /** Called once per distinct failure (for an Event). */
  readonly onFailure?: (error: string) => void;
}

/**
 * Starts the server now. When it cannot bind: with `hardFail` throws a {@linkcode ListenError};
 * otherwise logs it and tries again every `retryMs` (each failure logged) until it binds or `signal`
 * aborts. Returns a promise that settles when the server has finished (or the retries stopped).
 * @throws {ListenError} on the first failure when `hardFail` is set.
 */
export function keepListening(o: ListenOptions): Promise<void> {
  const address = `${o.address.hostname}:${o.address.port}`;
  const attempt = (): Deno.HttpServer | Error => {
    try {
      return o.start();
    } catch (e) {
      return e as Error;
    }
  };
  const first = attempt();
  if (!(first instanceof Error)) return first.finished;
  if (o.hardFail) throw new ListenError(o.server, address, { cause: first });
  const retryMs = o.retryMs ?? LISTEN_RETRY_MS;
  let reported = "";
  const failed = (error: string) => {
    o.log.error(`${o.server} server failed`, { address, error, retryInMs: retryMs });
    if (error !== reported) o.onFailure?.(error);
    reported = error;
  };
  failed(first.message);
  return new Promise((resolve) => {
    let cancel = () => {};
    const again = () => {
      const s = attempt();
      if (s instanceof Error) {
        failed(s.message);
        cancel = o.clock.setTimer(again, retryMs);
        return;
      }
      o.log.info(`${o.server} server listening`, { address });
      unregister();
      s.finished.then(() => resolve());
    };
    cancel = o.clock.setTimer(again, retryMs);
    const unregister = onAbort(o.signal, () => {
      cancel();
      resolve();
    });
  });
}
