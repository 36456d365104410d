/**
 * The proxier's side of the TCP workers (see `tcp_worker.ts`): starts them on the first sync,
 * sends each the desired ports, and gathers their answers and events.
 * @module
 */
import { RotationSlots } from "../../loadbalancer/shared_rotation.ts";
import type { SpliceLimits } from "../socket_proxy/tcp_copy.ts";
import type { ServingEvents } from "../socket_proxy/tcp_serve.ts";
import type { FromWorker, ToWorker, WorkerPort } from "./tcp_worker_protocol.ts";

/** A fixed number of TCP workers; construction starts none. */
export class TcpWorkerPool {
  readonly #n: number;
  readonly #events: ServingEvents;
  #workers: Worker[] = [];
  #nextId = 1;
  readonly #rotations = new RotationSlots();
  readonly #waiting = new Map<number, { left: number; failed: Map<string, string>; done: () => void }>();

  /** @param n workers to run (at least 1) @param events where their reports go */
  constructor(n: number, events: ServingEvents) {
    this.#n = n;
    this.#events = events;
  }

  /**
   * Makes every worker serve exactly `ports` (starting the workers the first time), each port's
   * endpoints rotated as one over all workers; resolves with the ports some worker could not open,
   * and why ("*": a worker died; all are restarted next time).
   */
  async sync(
    want: ReadonlyArray<Omit<WorkerPort, "slot">>,
    limits?: SpliceLimits,
  ): Promise<Map<string, string>> {
    this.#rotations.retain(new Set(want.map((p) => p.key)));
    const ports = want.map((p) => ({ ...p, slot: this.#rotations.slot(p.key) }));
    if (this.#workers.length === 0) {
      if (ports.length === 0) return new Map();
      this.#workers = Array.from({ length: this.#n }, () => this.#start());
    }
    const id = this.#nextId++;
    const failed = new Map<string, string>();
    const done = new Promise<void>((resolve) =>
      this.#waiting.set(id, { left: this.#workers.length, failed, done: resolve })
    );
    const m: ToWorker = { type: "sync", id, limits, ports, rotations: this.#rotations.buffer };
    for (const w of this.#workers) w.postMessage(m);
    await done;
    return failed;
  }

  /** Closes the workers' listeners and ends them (connections in flight end with them). */
  close(): void {
    for (const w of this.#workers) {
      w.postMessage({ type: "close" } satisfies ToWorker);
      w.terminate();
    }
    this.#workers = [];
    for (const w of this.#waiting.values()) w.done();
    this.#waiting.clear();
  }

  #start(): Worker {
    const w = new Worker(new URL("./tcp_worker.ts", import.meta.url), { type: "module", name: "tcp" });
    w.onmessage = (e: MessageEvent<FromWorker>) => {
      const m = e.data;
      switch (m.type) {
        case "synced": {
          const wait = this.#waiting.get(m.id);
          if (wait === undefined) return;
          for (const f of m.failed) wait.failed.set(f.key, f.error);
          if (--wait.left === 0) {
            this.#waiting.delete(m.id);
            wait.done();
          }
          return;
        }
        case "dialFailed":
          return this.#events.dialFailed(m.key, m.endpoint, m.error);
        case "acceptFailed":
          return this.#events.acceptFailed(m.key, m.error, m.first);
        case "acceptRecovered":
          return this.#events.acceptRecovered(m.key, m.failures);
        case "refused":
          return this.#events.refused?.(m.key, m.client);
      }
    };
    // A worker that died (an uncaught error) would never answer: end them all, fail the pending
    // syncs (retried with backoff), and start afresh at the next one.
    w.onerror = (e) => {
      e.preventDefault();
      const error = `TCP worker failed: ${e.message}`;
      for (const wait of this.#waiting.values()) wait.failed.set("*", error);
      this.close();
    };
    return w;
  }
}
