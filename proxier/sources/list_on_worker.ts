/**
 * The first EndpointSlice list, fetched and parsed on a worker while the main thread takes the
 * Services list. Until the first sync's build, parsing both lists and reading them into the
 * trackers holds the main thread while the second core has little to do; the worker posts each
 * slice as a row (`slice_rows.ts`) that the main thread rebuilds without parsing or reading it
 * again. One list, not both: with the Services on a worker too, the two workers and V8's helpers
 * shared the one spare core, and the start at 50,000 Services came level (bench/README.md).
 * @module
 */
import type { KubernetesListObject, V1EndpointSlice } from "@kubernetes/client-node";
import { WatchError } from "../runtime/errors.ts";
import type { ApiTls } from "./api_http_client.ts";
import type { ItemSink } from "./reflector.ts";
import { sliceFromRow, type SliceRow } from "./slice_rows.ts";

/**
 * Complete items the worker parses and posts at a time, in bytes: small, so the main thread takes
 * the first slices while the worker parses the rest (measured at 1 MiB only).
 */
const WORKER_BATCH_BYTES = 2 ** 20;

/** A request as the worker makes it: what `ApiClient` would send, in values a message can carry. */
export interface ForwardedRequest {
  readonly url: string;
  readonly headers: Array<[string, string]>;
  readonly tls: ApiTls;
  readonly proxyURL?: string;
}

/** What the worker is asked to list. */
export interface WorkerListJob extends ForwardedRequest {
  readonly nodeName: string;
  readonly batchBytes: number;
}

/** What the worker posts: rows of a batch, then the envelope, an HTTP failure or an error. */
export type WorkerListAnswer =
  | { readonly rows: SliceRow[] }
  | { readonly envelope: Record<string, unknown> }
  | { readonly status: number; readonly statusText: string }
  | { readonly error: PostedError };

/** An error as the worker posts it: its name, its message and its causes' messages, outermost first. */
export interface PostedError {
  readonly name: string;
  readonly messages: readonly string[];
}

/** Returns the error `e` describes, its causes chained as they were (a SyntaxError or TypeError as such). */
function errorOf(e: PostedError): Error {
  let cause: Error | undefined;
  for (const m of e.messages.slice(1).reverse()) cause = new Error(m, cause && { cause });
  const Kind = e.name === "SyntaxError" ? SyntaxError : e.name === "TypeError" ? TypeError : Error;
  return new Kind(e.messages[0] ?? e.name, cause && { cause });
}

/**
 * Lists EndpointSlices as `req` asks, on a worker: each batch goes to `sink` as slices carrying
 * their reading for `nodeName`; resolves with the list without its items. Rejects with a
 * {@linkcode WatchError} carrying the HTTP status on an HTTP failure, a `SyntaxError` on a body that
 * does not parse, the abort's reason when `signal` aborts. The worker has ended when it settles.
 */
export function listSlicesOnWorker(
  req: ForwardedRequest,
  nodeName: string,
  sink: ItemSink<V1EndpointSlice>,
  signal: AbortSignal,
): Promise<KubernetesListObject<V1EndpointSlice>> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL("./list_worker.ts", import.meta.url), {
      type: "module",
      name: "endpointslice-list",
    });
    const end = () => {
      worker.terminate();
      signal.removeEventListener("abort", aborted);
    };
    const fail = (e: unknown) => {
      end();
      reject(e);
    };
    const aborted = () => fail(signal.reason);
    signal.addEventListener("abort", aborted, { once: true });
    worker.onmessage = (m: MessageEvent<WorkerListAnswer>) => {
      const a = m.data;
      if ("rows" in a) {
        try {
          sink(a.rows.map((r) => sliceFromRow(r, nodeName)));
        } catch (e) {
          fail(e);
        }
      } else if ("envelope" in a) {
        end();
        resolve(a.envelope as unknown as KubernetesListObject<V1EndpointSlice>);
      } else if ("status" in a) {
        const path = new URL(req.url).pathname;
        fail(new WatchError(`list ${path}: HTTP ${a.status} ${a.statusText}`, a.status));
      } else {
        fail(errorOf(a.error));
      }
    };
    worker.onerror = (e) => {
      e.preventDefault();
      fail(new Error(`the EndpointSlice list's worker failed: ${e.message}`));
    };
    const job: WorkerListJob = { ...req, nodeName, batchBytes: WORKER_BATCH_BYTES };
    worker.postMessage(job);
  });
}
