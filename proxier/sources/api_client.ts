/**
 * List and watch requests on Deno's own fetch, for the source's reflectors (`reflector.ts`). The
 * watch keeps client-node's `Watch.watch` signature; client-node's own runs the npm `undici` fetch,
 * which under Deno does not notice a connection the API server dropped mid-stream (it then stalls
 * until its inactivity timeout); Deno's fetch reports the drop at once.
 *
 * Objects are slimmed as they arrive, as upstream kube-proxy's informers drop `managedFields`: also
 * kubectl's last-applied annotation (often larger than the rest of the object), `ownerReferences`
 * and each endpoint's `targetRef` (a pod reference per endpoint), none of which a proxy reads.
 * @module
 */
import type { KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
import { WatchError } from "../runtime/errors.ts";
import type { ApiAccess } from "./api_access.ts";
import { PROXY_LABEL_SELECTOR } from "./handlers.ts";
import { ListSplitter } from "./list_stream.ts";
import type { ForwardedRequest } from "./list_on_worker.ts";
import type { ItemSink } from "./reflector.ts";
import type { RateLimiter } from "./rate_limiter.ts";

/** The callback signature of client-node's `Watch.watch`. */
export type WatchCallback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;

/** The selectors of a list (and of the watch that follows it). */
export interface ListQuery {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
}

/** Options of {@linkcode ApiClient}. */
export interface ApiClientOptions {
  /** A stream silent for this long is presumed dead and aborted (the informer reconnects). */
  readonly inactivityTimeoutMs?: number;
  /**
   * A list not answered within this long is abandoned (the informer retries with backoff): an API
   * server that accepts the request and never answers would otherwise stop that informer for
   * ever. Default 60 s (a list of 10,000 EndpointSlices takes a few seconds).
   */
  readonly listTimeoutMs?: number;
  /** Server-side watch timeout range in seconds, randomized as client-go does. */
  readonly minTimeoutSeconds?: number;
  /** `--kube-api-qps` / `--kube-api-burst`: every request waits for a token; undefined: no limit. */
  readonly limiter?: RateLimiter;
  /** Called once per request with its outcome (client-go's rest_client metrics). */
  readonly observe?: (r: { method: string; host: string; code: string; seconds: number }) => void;
  /** Complete items of a list parsed at a time, in bytes: `list_stream.ts`'s `PARSE_BATCH_BYTES` unless set. */
  readonly parseBatchBytes?: number;
}

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** Drops what no proxy reads and what costs the most memory; returns `o`. */
export function slim<T>(o: T): T {
  const meta = (o as KubernetesObject | null)?.metadata;
  if (meta !== undefined && meta !== null) {
    delete meta.managedFields;
    delete meta.ownerReferences;
    if (meta.annotations?.[LAST_APPLIED] !== undefined) delete meta.annotations[LAST_APPLIED];
  }
  const endpoints = (o as { endpoints?: unknown }).endpoints;
  if (Array.isArray(endpoints)) {
    for (const e of endpoints) {
      if (e !== null && typeof e === "object") delete (e as { targetRef?: unknown }).targetRef;
    }
  }
  return o;
}

/** Returns the URL the client requests for `path` on `server` with `query` (its undefined values left out). */
export function requestURL(server: string, path: string, query: object): URL {
  const url = new URL(server + path);
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined) url.searchParams.set(k, String(v));
  }
  return url;
}

/** Lists and watches API paths with Deno's fetch, honouring the server, TLS and credentials of `access`. */
export class ApiClient {
  readonly #access: ApiAccess;
  readonly #inactivityMs: number;
  readonly #minTimeoutSeconds: number;
  readonly #listTimeoutMs: number;
  readonly #limiter?: RateLimiter;
  readonly #observe?: ApiClientOptions["observe"];
  readonly #batchBytes?: number;

  /** Builds the client; opens no connection until a request. */
  constructor(access: ApiAccess, opts: ApiClientOptions = {}) {
    this.#access = access;
    this.#inactivityMs = opts.inactivityTimeoutMs ?? 150_000;
    this.#minTimeoutSeconds = opts.minTimeoutSeconds ?? 300;
    this.#listTimeoutMs = opts.listTimeoutMs ?? 60_000;
    this.#limiter = opts.limiter;
    this.#observe = opts.observe;
    this.#batchBytes = opts.parseBatchBytes;
  }

  /** `fetch` that reports each request's status (`<error>` when none came) and latency. */
  async #fetch(
    url: URL,
    init: RequestInit & { client?: Deno.HttpClient },
    method = "GET",
  ): Promise<Response> {
    const start = performance.now();
    let code = "<error>";
    try {
      const res = await fetch(url, init);
      code = String(res.status);
      return res;
    } finally {
      this.#observe?.({ method, host: url.host, code, seconds: (performance.now() - start) / 1000 });
    }
  }

  #url(path: string, query: object): URL {
    return requestURL(this.#access.server, path, query);
  }

  /**
   * Lists `path` (with `labelSelector`/`fieldSelector` when given); resolves with the list, its
   * items slimmed, parsed a chunk at a time as the body arrives (`list_stream.ts`). With `sink`,
   * each batch goes to it as it is parsed and the list resolves without them. Rejects with a
   * {@linkcode WatchError} carrying the HTTP status on failure, a `SyntaxError` on a body that does not parse.
   */
  async list<T extends KubernetesObject>(
    path: string,
    query: ListQuery = {},
    sink?: ItemSink<T>,
  ): Promise<KubernetesListObject<T>> {
    return await this.#request("list", path, query, async (res) => {
      const items: T[] = [];
      const splitter = new ListSplitter<T>((batch) => {
        for (const o of batch) slim(o);
        if (sink !== undefined) sink(batch);
        else for (const o of batch) items.push(o);
      }, this.#batchBytes);
      for await (const chunk of res.body ?? []) splitter.push(chunk);
      const list = splitter.finish() as unknown as KubernetesListObject<T>;
      if (list.items !== undefined || items.length > 0) list.items = items;
      return list;
    });
  }

  /**
   * Lists `path` by handing the request to `run` (another thread's fetch of it), within the same rate
   * limit and deadline as {@linkcode list}, and counted in the same metrics (its latency up to the
   * list's end, the only moment this thread sees). Rejects as `run` does, or with a
   * {@linkcode WatchError} when the deadline passed.
   */
  async listThrough<T>(
    path: string,
    query: ListQuery,
    run: (req: ForwardedRequest, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    await this.#limiter?.wait();
    const signal = AbortSignal.timeout(this.#listTimeoutMs);
    const url = this.#url(path, query);
    const start = performance.now();
    let code = "<error>";
    try {
      const { tls, proxyURL } = this.#access;
      const headers = [...await this.#access.headers()];
      const out = await run(
        { url: url.href, headers, tls, ...(proxyURL === undefined ? {} : { proxyURL }) },
        signal,
      );
      code = "200";
      return out;
    } catch (e) {
      if (e instanceof WatchError && e.statusCode !== undefined) code = String(e.statusCode);
      if (!signal.aborted) throw e;
      throw new WatchError(`list ${path}: no answer within ${this.#listTimeoutMs / 1000} s`, undefined, {
        cause: e,
      });
    } finally {
      this.#observe?.({ method: "GET", host: url.host, code, seconds: (performance.now() - start) / 1000 });
    }
  }

  /**
   * Reads the one object at `path`; resolves with it slimmed, undefined when the API has none (404).
   * Rejects with a {@linkcode WatchError} carrying the HTTP status on any other failure.
   */
  async get<T extends KubernetesObject>(path: string): Promise<T | undefined> {
    try {
      return slim(await this.#request("get", path, {}, (res) => res.json() as Promise<T>));
    } catch (e) {
      if (e instanceof WatchError && e.statusCode === 404) return undefined;
      throw e;
    }
  }

  /** GETs `path` and reads the answer with `read`, within the list deadline (body included). */
  async #request<T>(
    verb: string,
    path: string,
    query: ListQuery,
    read: (res: Response) => Promise<T>,
  ): Promise<T> {
    await this.#limiter?.wait();
    // The deadline covers the body too: a server may send headers and then stall.
    const signal = AbortSignal.timeout(this.#listTimeoutMs);
    try {
      const res = await this.#fetch(this.#url(path, query), {
        headers: await this.#access.headers(),
        client: this.#access.client,
        signal,
      });
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new WatchError(`${verb} ${path}: HTTP ${res.status} ${res.statusText}`, res.status);
      }
      return await read(res);
    } catch (e) {
      if (!signal.aborted) throw e;
      throw new WatchError(`${verb} ${path}: no answer within ${this.#listTimeoutMs / 1000} s`, undefined, {
        cause: e,
      });
    }
  }

  /**
   * Creates `body` at `path` (a POST); resolves with the HTTP status. Rejects only when no answer
   * came (the cause says why).
   */
  async create(path: string, body: unknown): Promise<number> {
    await this.#limiter?.wait();
    const headers = await this.#access.headers();
    headers.set("content-type", "application/json");
    const res = await this.#fetch(this.#url(path, {}), {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      client: this.#access.client,
    }, "POST");
    await res.body?.cancel();
    return res.status;
  }

  /**
   * Starts a watch of `path`: `callback` receives each event, `done` is called exactly once when
   * the stream ends (null) or fails (an error; `statusCode` set for HTTP errors). Returns the
   * controller that aborts it. The signature is client-node's `Watch.watch`.
   */
  async watch(
    path: string,
    queryParams: Record<string, unknown>,
    callback: WatchCallback,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const controller = new AbortController();
    let finished = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      controller.abort();
      done(err);
    };
    const touch = () => {
      clearTimeout(timer);
      timer = setTimeout(
        () => finish(new DOMException("watch inactive", "TimeoutError")),
        this.#inactivityMs,
      );
    };
    try {
      const t = this.#minTimeoutSeconds;
      const url = this.#url(path, {
        watch: "true",
        allowWatchBookmarks: "true",
        timeoutSeconds: t + Math.floor(Math.random() * t),
        ...queryParams,
      });
      await this.#limiter?.wait(controller.signal);
      touch();
      const res = await this.#fetch(url, {
        headers: await this.#access.headers(),
        signal: controller.signal,
        client: this.#access.client,
      });
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new WatchError(`watch ${path}: HTTP ${res.status} ${res.statusText}`, res.status);
      }
      (async () => {
        let rest = "";
        const decoder = new TextDecoder();
        for await (const chunk of res.body!) {
          touch();
          rest += decoder.decode(chunk, { stream: true });
          let nl;
          while ((nl = rest.indexOf("\n")) >= 0) {
            const line = rest.slice(0, nl);
            rest = rest.slice(nl + 1);
            if (line.trim() === "") continue;
            let ev: { type: string; object: unknown };
            try {
              ev = JSON.parse(line);
            } catch {
              continue; // as client-node: a garbled line is skipped
            }
            callback(ev.type, slim(ev.object), ev);
          }
        }
        finish(null);
      })().catch((e) => finish(e));
    } catch (e) {
      finish(e);
    }
    return controller;
  }
}

/** The kinds the Kubernetes source lists and watches, in the order it starts them. */
export const SOURCE_KINDS = ["Service", "EndpointSlice", "Node", "ServiceCIDR"] as const;

/** What the Kubernetes source lists and watches: each kind's path and selectors, as kube-proxy's. */
export type SourceKind = typeof SOURCE_KINDS[number];

/** Returns each kind's path and query for `nodeName` (the own Node is selected by name). */
export function sourceQueries(nodeName: string): Record<SourceKind, { path: string; query: ListQuery }> {
  return {
    Service: { path: "/api/v1/services", query: { labelSelector: PROXY_LABEL_SELECTOR } },
    EndpointSlice: {
      path: "/apis/discovery.k8s.io/v1/endpointslices",
      query: { labelSelector: PROXY_LABEL_SELECTOR },
    },
    Node: { path: "/api/v1/nodes", query: { fieldSelector: `metadata.name=${nodeName}` } },
    ServiceCIDR: { path: "/apis/networking.k8s.io/v1/servicecidrs", query: {} },
  };
}
