/**
 * Sources of Services, EndpointSlices and the own Node: client-node informers or YAML files.
 * Both turn what they see into handler calls with (old, new) pairs.
 * @module
 */
import {
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesObject,
  type ListPromise,
  ListWatch,
  loadAllYaml,
  type V1EndpointSlice,
  type V1Node,
  type V1Service,
  type Watch,
} from "@kubernetes/client-node";
import type { Clock } from "../clock.ts";
import type { Logger } from "../logger.ts";
import { NativeWatch } from "./native_watch.ts";
import type { EndpointSliceHandler, NodeHandler, ServiceHandler } from "../base_proxier.ts";

/** What a source feeds: every handler kind. */
export type EventHandler = ServiceHandler & EndpointSliceHandler & NodeHandler;

/** kube-proxy's selector: skip headless endpoints and objects owned by another service proxy. */
export const PROXY_LABEL_SELECTOR =
  "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

/** Per-kind dispatch of (old, new) events to a handler. */
interface KindHandler<T> {
  add(o: T): void;
  update(old: T, o: T): void;
  delete(o: T): void;
  synced(): void;
}

function kindHandlers(h: EventHandler) {
  return {
    Service: {
      add: (o: V1Service) => h.onServiceAdd(o),
      update: (a: V1Service, b: V1Service) => h.onServiceUpdate(a, b),
      delete: (o: V1Service) => h.onServiceDelete(o),
      synced: () => h.onServicesSynced(),
    } satisfies KindHandler<V1Service>,
    EndpointSlice: {
      add: (o: V1EndpointSlice) => h.onEndpointSliceAdd(o),
      update: (a: V1EndpointSlice, b: V1EndpointSlice) => h.onEndpointSliceUpdate(a, b),
      delete: (o: V1EndpointSlice) => h.onEndpointSliceDelete(o),
      synced: () => h.onEndpointSlicesSynced(),
    } satisfies KindHandler<V1EndpointSlice>,
    Node: {
      add: (o: V1Node) => h.onNodeAdd(o),
      update: (a: V1Node, b: V1Node) => h.onNodeUpdate(a, b),
      delete: (o: V1Node) => h.onNodeDelete(o),
      synced: () => h.onNodeSynced(),
    } satisfies KindHandler<V1Node>,
  };
}

/** Returns `namespace/name` (or `name` for cluster-scoped objects). */
export function objectKey(o: KubernetesObject): string {
  const ns = o.metadata?.namespace;
  return ns ? `${ns}/${o.metadata?.name}` : String(o.metadata?.name);
}

const BACKOFF_START_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

/** Options of {@linkcode KubernetesSource}. */
export interface KubernetesSourceOptions {
  readonly kubeConfig: KubeConfig;
  readonly nodeName: string;
  readonly handler: EventHandler;
  readonly log: Logger;
  readonly clock: Clock;
}

/**
 * Watches Services, EndpointSlices and the own Node with client-node informers. Relists on 410
 * Gone (the informer does), restarts after any other error with exponential backoff, and keeps the
 * last known objects meanwhile: the proxy never exits because the API server is away.
 */
export class KubernetesSource {
  readonly #o: KubernetesSourceOptions;

  /** Builds the source; connects to nothing until {@linkcode run}. */
  constructor(opts: KubernetesSourceOptions) {
    this.#o = opts;
  }

  /** Runs the informers until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { kubeConfig: kc, nodeName } = this.#o;
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const watch = new NativeWatch(kc) as unknown as Watch;
    const h = kindHandlers(this.#o.handler);
    const stops = [
      this.#inform<V1Service>(
        "Service",
        h.Service,
        signal,
        (listFn) => new ListWatch("/api/v1/services", watch, listFn, false, PROXY_LABEL_SELECTOR),
        () => core.listServiceForAllNamespaces({ labelSelector: PROXY_LABEL_SELECTOR }),
      ),
      this.#inform<V1EndpointSlice>(
        "EndpointSlice",
        h.EndpointSlice,
        signal,
        (listFn) =>
          new ListWatch(
            "/apis/discovery.k8s.io/v1/endpointslices",
            watch,
            listFn,
            false,
            PROXY_LABEL_SELECTOR,
          ),
        () => discovery.listEndpointSliceForAllNamespaces({ labelSelector: PROXY_LABEL_SELECTOR }),
      ),
      this.#inform<V1Node>(
        "Node",
        h.Node,
        signal,
        (listFn) =>
          new ListWatch("/api/v1/nodes", watch, listFn, false, undefined, `metadata.name=${nodeName}`),
        () => core.listNode({ fieldSelector: `metadata.name=${nodeName}` }),
      ),
    ];
    await Promise.all(stops);
  }

  /** Drives one informer until aborted; resolves after it is stopped. */
  async #inform<T extends KubernetesObject>(
    kind: string,
    h: KindHandler<T>,
    signal: AbortSignal,
    makeListWatch: (listFn: ListPromise<T>) => ListWatch<T>,
    list: ListPromise<T>,
  ): Promise<void> {
    const { log, clock } = this.#o;
    const last = new Map<string, T>();
    let synced = false;
    let backoff = 0;
    let cancelRetry = () => {};
    // The informer reports no "synced": the first list's items are delivered synchronously after
    // its list call resolves, so a macrotask scheduled then runs after all of them.
    const lw = makeListWatch(async () => {
      const result = await list();
      if (!synced) {
        setTimeout(() => {
          if (synced) return;
          synced = true;
          log.info("Initial list complete", { kind, objects: last.size });
          h.synced();
        }, 0);
      }
      return result;
    });
    const upsert = (o: T) => {
      backoff = 0;
      const key = objectKey(o);
      const old = last.get(key);
      last.set(key, o);
      if (old === undefined) h.add(o);
      else h.update(old, o);
    };
    lw.on("add", upsert);
    lw.on("update", upsert);
    lw.on("delete", (o) => {
      const key = objectKey(o);
      const old = last.get(key) ?? o;
      last.delete(key);
      h.delete(old);
    });
    lw.on("connect", () => {
      if (!synced) return;
      log.debug("Watch (re)connecting", { kind });
    });
    lw.on("error", (err) => {
      if (signal.aborted) return;
      backoff = Math.min(BACKOFF_MAX_MS, backoff === 0 ? BACKOFF_START_MS : backoff * 2);
      log.warn("Watch failed; keeping the last known state and retrying", {
        kind,
        error: String((err as Error)?.message ?? err),
        retryInMs: backoff,
      });
      cancelRetry = clock.setTimer(() => {
        if (!signal.aborted) lw.start().catch(() => {});
      }, backoff);
    });
    lw.start().catch(() => {});
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
    cancelRetry();
    await lw.stop();
  }
}

/** Options of {@linkcode FileSource}. */
export interface FileSourceOptions {
  /** A YAML/JSON file or a directory of them. */
  readonly path: string;
  readonly nodeName: string;
  readonly handler: EventHandler;
  readonly log: Logger;
}

const KINDS = new Set(["Service", "EndpointSlice", "Node"]);

/**
 * Reads Services, EndpointSlices and Nodes from files and follows changes to them. A file that
 * does not parse is reported by path and line, and its previous objects stay.
 */
export class FileSource {
  readonly #o: FileSourceOptions;
  readonly #h: ReturnType<typeof kindHandlers>;
  /** Objects per file, as last parsed successfully. */
  readonly #byFile = new Map<string, Map<string, KubernetesObject>>();
  /** The merged view handlers last saw, keyed by `Kind/namespace/name`. */
  #current = new Map<string, KubernetesObject>();

  /** Builds the source; reads nothing until {@linkcode load}. */
  constructor(opts: FileSourceOptions) {
    this.#o = opts;
    this.#h = kindHandlers(opts.handler);
  }

  /** Reads every file, delivers the objects and then the synced calls. */
  async load(): Promise<void> {
    await this.#reload();
    this.#h.Service.synced();
    this.#h.EndpointSlice.synced();
    this.#h.Node.synced();
  }

  /** Re-reads the files whenever they change, until `signal` aborts. */
  async watch(signal: AbortSignal): Promise<void> {
    const info = await Deno.stat(this.#o.path);
    const dir = info.isDirectory ? this.#o.path : dirname(this.#o.path);
    const watcher = Deno.watchFs(dir, { recursive: false });
    signal.addEventListener("abort", () => watcher.close(), { once: true });
    // Edits between load() and the watcher's start would otherwise be missed.
    await this.#reload();
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      for await (const _ of watcher) {
        // Editors write in bursts (truncate, write, rename): reload once they settle.
        clearTimeout(timer);
        timer = setTimeout(
          () => this.#reload().catch((e) => this.#o.log.error("Reload failed", { error: String(e) })),
          100,
        );
      }
    } finally {
      clearTimeout(timer);
    }
  }

  async #files(): Promise<string[]> {
    const { path } = this.#o;
    const info = await Deno.stat(path);
    if (!info.isDirectory) return [path];
    const out: string[] = [];
    for await (const e of Deno.readDir(path)) {
      if (e.isFile && /\.(ya?ml|json)$/.test(e.name) && !e.name.startsWith(".")) {
        out.push(`${path}/${e.name}`);
      }
    }
    return out.sort();
  }

  async #reload(): Promise<void> {
    const { log, nodeName } = this.#o;
    const files = await this.#files();
    for (const f of [...this.#byFile.keys()]) if (!files.includes(f)) this.#byFile.delete(f);
    for (const f of files) {
      let text: string;
      try {
        text = await Deno.readTextFile(f);
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) {
          this.#byFile.delete(f);
          continue;
        }
        log.error("Cannot read source file; keeping its previous objects", { path: f, error: String(e) });
        continue;
      }
      let docs: unknown[];
      try {
        docs = loadAllYaml(text);
      } catch (e) {
        const mark = (e as { mark?: { line: number } }).mark;
        log.error("Source file does not parse; keeping its previous objects", {
          path: f,
          line: mark ? mark.line + 1 : undefined,
          error: (e as Error).message.split("\n")[0],
        });
        continue;
      }
      const objects = new Map<string, KubernetesObject>();
      for (const doc of docs.flatMap(expandList)) {
        const o = doc as KubernetesObject;
        if (o === null || typeof o !== "object" || !KINDS.has(String(o.kind))) continue;
        if (o.kind === "Node" && o.metadata?.name !== nodeName) continue;
        // Round-trip through JSON so objects look as the API serves them (no Date instances).
        objects.set(`${o.kind}/${objectKey(o)}`, JSON.parse(JSON.stringify(o)));
      }
      this.#byFile.set(f, objects);
    }
    const next = new Map<string, KubernetesObject>();
    for (const objs of this.#byFile.values()) for (const [k, o] of objs) next.set(k, o);
    const prev = this.#current;
    this.#current = next;
    for (const [k, o] of next) {
      const old = prev.get(k);
      if (old === undefined) this.#dispatch(o, "add");
      else if (JSON.stringify(old) !== JSON.stringify(o)) this.#dispatch(o, "update", old);
    }
    for (const [k, o] of prev) if (!next.has(k)) this.#dispatch(o, "delete");
  }

  #dispatch(o: KubernetesObject, verb: "add" | "update" | "delete", old?: KubernetesObject): void {
    const h = this.#h[o.kind as "Service"] as KindHandler<KubernetesObject>;
    if (verb === "update") h.update(old!, o);
    else h[verb](o);
  }
}

function expandList(doc: unknown): unknown[] {
  const d = doc as { kind?: string; items?: unknown[] } | null;
  return d !== null && typeof d === "object" && typeof d.kind === "string" && d.kind.endsWith("List") &&
      Array.isArray(d.items)
    ? d.items
    : [doc];
}

function dirname(p: string): string {
  const i = p.lastIndexOf("/");
  return i <= 0 ? (i === 0 ? "/" : ".") : p.slice(0, i);
}
