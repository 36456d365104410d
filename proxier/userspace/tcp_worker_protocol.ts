/**
 * Messages between the userspace proxier and its TCP workers (`tcp_worker.ts`).
 * @module
 */
import type { SpliceLimits } from "./tcp_copy.ts";

/** One service port as the workers serve it: where to listen, and the endpoints to balance over. */
export interface WorkerPort {
  readonly key: string;
  /** Concrete addresses and ports (never port 0: every worker must bind the same one). */
  readonly listen: ReadonlyArray<{ readonly hostname: string; readonly port: number }>;
  readonly endpoints: readonly string[];
}

/** From the proxier to a worker. */
export type ToWorker =
  | {
    readonly type: "sync";
    readonly id: number;
    readonly limits?: SpliceLimits;
    readonly ports: readonly WorkerPort[];
  }
  | { readonly type: "close" };

/** From a worker to the proxier. */
export type FromWorker =
  | {
    readonly type: "synced";
    readonly id: number;
    readonly failed: ReadonlyArray<{ key: string; error: string }>;
  }
  | { readonly type: "dialFailed"; readonly key: string; readonly endpoint: string; readonly error: string }
  | { readonly type: "acceptFailed"; readonly key: string; readonly error: string; readonly first: boolean }
  | { readonly type: "acceptRecovered"; readonly key: string; readonly failures: number };
