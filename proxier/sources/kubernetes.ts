/**
 * The Kubernetes API source: one {@linkcode Reflector} per kind over {@linkcode ApiClient}.
 * @module
 */
import type { KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
import type { ApiAccess } from "./api_access.ts";
import { ApiClient, SOURCE_KINDS, type SourceKind, sourceQueries } from "./api_client.ts";
import type { PrefetchedLists } from "./first_lists.ts";
import type { Clock } from "../runtime/clock.ts";
import { describeError, shortError } from "../runtime/errors.ts";
import type { Logger } from "../runtime/logger.ts";
import { type EventHandler, type KindHandler, kindHandlers } from "./handlers.ts";
import { type ItemSink, Reflector } from "./reflector.ts";
import { onAbort } from "../runtime/abort.ts";

const BACKOFF_START_MS = 1000;
const BACKOFF_MAX_MS = 30_000;
/** Failures of the kinds this close together are one retry, said once. */
const UNREACHABLE_SAY_MS = 1000;

/** Options of {@linkcode KubernetesSource}. */
export interface KubernetesSourceOptions {
  readonly access: ApiAccess;
  readonly nodeName: string;
  readonly handler: EventHandler;
  readonly log: Logger;
  readonly clock: Clock;
  /** First lists already requested ({@linkcode prefetchLists}); each informer's first list uses its own. */
  readonly prefetched?: PrefetchedLists;
  /** The client to use (one rate limit for every request); default: a new one on `access`. */
  readonly api?: ApiClient;
}

/**
 * Watches Services, EndpointSlices, ServiceCIDRs and the own Node. Relists on 410 Gone (the
 * reflector does), restarts after any other error with exponential backoff, and keeps the last
 * known objects meanwhile: the proxy never exits because the API server is away.
 */
export class KubernetesSource {
  readonly #o: KubernetesSourceOptions;
  /** When a retry was last said: the kinds fail together, and one line says so for all. */
  readonly #unreachable = { saidMs: -Infinity };

  /** Builds the source; connects to nothing until {@linkcode run}. */
  constructor(opts: KubernetesSourceOptions) {
    this.#o = opts;
  }

  /** Runs one reflector per kind until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { access, nodeName, prefetched } = this.#o;
    const api = this.#o.api ?? new ApiClient(access);
    const h = kindHandlers(this.#o.handler) as unknown as Record<SourceKind, KindHandler<KubernetesObject>>;
    const queries = sourceQueries(nodeName);
    await Promise.all(SOURCE_KINDS.map((kind) => {
      const q = queries[kind];
      let first = prefetched?.take(kind);
      return this.#inform(kind, h[kind], signal, q.path, { ...q.query }, (sink) => {
        // The prefetched list serves the first call only; relists ask again.
        const p = first?.(sink) ?? api.list(q.path, q.query, sink);
        first = undefined;
        return p;
      }, api);
    }));
  }

  /**
   * Drives one reflector until aborted; resolves after it is stopped. ServiceCIDRs are optional: an
   * API server that does not serve them (before 1.33: 404) or a role that may not list them (403)
   * is said once, and the proxy runs without them, as before they existed.
   */
  async #inform<T extends KubernetesObject>(
    kind: string,
    h: KindHandler<T>,
    signal: AbortSignal,
    path: string,
    query: Record<string, string | undefined>,
    list: (sink: ItemSink<T>) => Promise<KubernetesListObject<T>>,
    api: ApiClient,
  ): Promise<void> {
    const { log, clock } = this.#o;
    const unreachable = this.#unreachable;
    let synced = false;
    let backoff = 0;
    let cancelRetry = () => {};
    let gaveUp = () => {};
    const given = new Promise<void>((resolve) => gaveUp = resolve);
    const reflector: Reflector<T> = new Reflector<T>({
      path,
      query,
      list,
      watcher: api,
      clock,
      retain: h.retain,
      handlers: {
        add: (o) => {
          backoff = 0;
          h.add(o);
        },
        update: (old, o) => {
          backoff = 0;
          h.update(old, o);
        },
        delete: (o) => h.delete(o),
        listed: () => {
          if (synced) return;
          synced = true;
          log.info("Initial list complete", { kind, objects: reflector.size });
          h.synced();
        },
        error: (err) => {
          if (signal.aborted) return;
          const status = (err as { statusCode?: number }).statusCode;
          if (kind === "ServiceCIDR" && (status === 404 || status === 403)) {
            log.warn(
              "Cannot list ServiceCIDRs; traffic to unallocated cluster IPs is not dropped (nftables mode)",
              {
                error: describeError(err),
                hint: status === 404
                  ? "the API server predates networking.k8s.io/v1 ServiceCIDR (Kubernetes 1.33)"
                  : "grant list and watch on servicecidrs.networking.k8s.io (deploy/daemonset.yaml's ClusterRole)",
              },
            );
            gaveUp();
            return;
          }
          backoff = Math.min(BACKOFF_MAX_MS, backoff === 0 ? BACKOFF_START_MS : backoff * 2);
          // One short line per retry of all four kinds (they fail together when the server is
          // unreachable); the whole error at -v=2.
          if (clock.now() - unreachable.saidMs >= UNREACHABLE_SAY_MS) {
            unreachable.saidMs = clock.now();
            log.warn("Watch failed; keeping the last known state and retrying", {
              error: shortError(err),
              retryInMs: backoff,
            });
          }
          log.debug("Watch failed", { kind, error: describeError(err), retryInMs: backoff }, 2);
          cancelRetry = clock.setTimer(() => {
            if (!signal.aborted) reflector.start().catch(() => {});
          }, backoff);
        },
      },
    });
    reflector.start().catch(() => {});
    await Promise.race([
      given,
      new Promise<void>((resolve) => onAbort(signal, resolve)),
    ]);
    cancelRetry();
    reflector.stop();
  }
}
