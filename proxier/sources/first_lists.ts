/**
 * The first list of each kind, requested as the program starts (while it still loads the informer
 * and probes the kernel) and handed to the informers as their first lists. The EndpointSlices' is
 * fetched and parsed on a worker (`list_on_worker.ts`) while the main thread takes the Services'.
 * @module
 */
import type { KubernetesListObject, KubernetesObject, V1EndpointSlice } from "@kubernetes/client-node";
import {
  type ApiClient,
  type ListQuery,
  SOURCE_KINDS,
  type SourceKind,
  sourceQueries,
} from "./api_client.ts";
import { listSlicesOnWorker } from "./list_on_worker.ts";
import type { ItemSink } from "./reflector.ts";

/** A list requested ahead: resolves as {@linkcode ApiClient.list}, its items sent to `sink`. */
export type TakenList = (sink: ItemSink<KubernetesObject>) => Promise<KubernetesListObject<KubernetesObject>>;

/**
 * A list requested before anyone receives its items: the batches parsed meanwhile are held, and
 * handed to the receiver as it comes ({@linkcode take}); later ones go straight to it.
 */
class EarlyList {
  readonly done: Promise<KubernetesListObject<KubernetesObject>>;
  #held: Array<readonly KubernetesObject[]> | undefined = [];
  #sink: ItemSink<KubernetesObject> | undefined;

  /** `nodeName`: when given, the list is of EndpointSlices, fetched and parsed on a worker (`list_on_worker.ts`). */
  constructor(api: ApiClient, path: string, query: ListQuery, nodeName?: string) {
    const sink = (items: readonly KubernetesObject[]) => {
      if (this.#sink !== undefined) this.#sink(items);
      else this.#held!.push(items);
    };
    this.done = nodeName === undefined ? api.list(path, query, sink) : api.listThrough(
      path,
      query,
      (req, signal) => listSlicesOnWorker(req, nodeName, sink as ItemSink<V1EndpointSlice>, signal),
    ) as Promise<KubernetesListObject<KubernetesObject>>;
    this.done.catch(() => {}); // handled by the informer that takes it
  }

  take: TakenList = (sink) => {
    const held = this.#held ?? [];
    this.#held = undefined;
    this.#sink = sink;
    for (const items of held) sink(items);
    return this.done;
  };
}

/**
 * The first list of each kind, requested before the informers exist, handed over once: whoever
 * still holds this after the informers took their lists holds none of them (the first lists are
 * every object in full, and a running proxy keeps only what its handlers retain).
 */
export class PrefetchedLists {
  readonly #lists = new Map<SourceKind, EarlyList>();

  /**
   * Requests the first list of every kind of `queries` on `api` now; with `nodeName`, the
   * EndpointSlices' on a worker, read for that node, while the main thread takes the Services'.
   */
  constructor(
    api: ApiClient,
    queries: Record<SourceKind, { path: string; query: ListQuery }>,
    nodeName?: string,
  ) {
    for (const k of SOURCE_KINDS) {
      const { path, query } = queries[k];
      this.#lists.set(k, new EarlyList(api, path, query, k === "EndpointSlice" ? nodeName : undefined));
    }
  }

  /**
   * Returns `kind`'s list and forgets it; undefined once taken (a relist asks the server again).
   * Its items parsed so far go to the sink at once, the rest as they are parsed.
   */
  take(kind: SourceKind): TakenList | undefined {
    const l = this.#lists.get(kind);
    this.#lists.delete(kind);
    return l?.take;
  }

  /** How many lists are not taken yet. */
  get held(): number {
    return this.#lists.size;
  }

  /** Resolves once every list not taken yet has answered (or failed). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#lists.values()].map((l) => l.done));
  }
}

/**
 * Starts the first list of every kind now (while the program still loads the informer and probes
 * the kernel); the informers take these as their first lists. A failure surfaces when an informer
 * takes it, and is retried like any failed list.
 */
export function prefetchLists(api: ApiClient, nodeName: string): PrefetchedLists {
  return new PrefetchedLists(api, sourceQueries(nodeName), nodeName);
}
