/**
 * Messages between the userspace proxier and its TCP workers (`tcp_worker.ts`).
 * @module
 */
import type { SpliceLimits } from "../socket_proxy/tcp_copy.ts";

/** One service port as the workers serve it: where to listen, and the endpoints to balance over. */
export interface WorkerPort {
  readonly key: string;
  /** Concrete addresses and ports (never port 0: every worker must bind the same one). */
  readonly listen: ReadonlyArray<{ readonly hostname: string; readonly port: number }>;
  /** In rotation order (shuffled once on the main thread, so every worker has the same order). */
  readonly endpoints: readonly string[];
  /** This port's rotation position in the sync's `rotations` buffer (`shared_rotation.ts`). */
  readonly slot: number;
  /** The clients it serves (`loadBalancerSourceRanges`); absent: every client. */
  readonly allow?: readonly string[];
}

/** From the proxier to a worker. */
export type ToWorker =
  | {
    readonly type: "sync";
    readonly id: number;
    readonly limits?: SpliceLimits;
    readonly ports: readonly WorkerPort[];
    /** The same buffer in every sync: workers rotate over each port's endpoints as one. */
    readonly rotations: SharedArrayBuffer;
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
  | { readonly type: "acceptRecovered"; readonly key: string; readonly failures: number }
  | { readonly type: "refused"; readonly key: string; readonly client: string };
