/**
 * A small Kubernetes API server for tests: list with resourceVersion, chunked watch streams
 * (newline-delimited JSON events), bookmarks, 410 Gone for compacted versions, label and field
 * selectors of the forms kube-proxy uses, namespaced lists and gets, and pod exec over the WebSocket
 * stream protocol (`exec_stream_server.ts`). Every request's RBAC attributes are recorded, and any
 * can be forbidden. The real client-node informers run against it unchanged.
 * @module
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { type ExecPlan, type ExecRequest, serveExec } from "./exec_stream_server.ts";
import { type ApiAccess, loadApiAccess } from "../../proxier/sources/api_access.ts";

interface Resource {
  readonly path: string;
  readonly listKind: string;
  readonly apiVersion: string;
  readonly namespaced: boolean;
}

const RESOURCES: Record<string, Resource> = {
  services: { path: "/api/v1/services", listKind: "ServiceList", apiVersion: "v1", namespaced: true },
  endpointslices: {
    path: "/apis/discovery.k8s.io/v1/endpointslices",
    listKind: "EndpointSliceList",
    apiVersion: "discovery.k8s.io/v1",
    namespaced: true,
  },
  nodes: { path: "/api/v1/nodes", listKind: "NodeList", apiVersion: "v1", namespaced: false },
  servicecidrs: {
    path: "/apis/networking.k8s.io/v1/servicecidrs",
    listKind: "ServiceCIDRList",
    apiVersion: "networking.k8s.io/v1",
    namespaced: false,
  },
  pods: { path: "/api/v1/pods", listKind: "PodList", apiVersion: "v1", namespaced: true },
};

/** A request's RBAC attributes, as an authorizer sees them. */
export interface Access {
  readonly verb: string;
  /** `pods`, or a subresource: `pods/exec`. */
  readonly resource: string;
  readonly namespace?: string;
  /** The object's name, for a request on one object. */
  readonly name?: string;
}

/** A path's resource, namespace, name and subresource (`/api/v1/namespaces/NS/pods/NAME/exec`). */
function route(
  pathname: string,
): { name: string; namespace?: string; object?: string; sub?: string } | undefined {
  const m =
    /^(\/api\/v1|\/apis\/[^/]+\/[^/]+)(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/
      .exec(pathname);
  if (m === null) return undefined;
  const [, prefix, namespace, name, object, sub] = m;
  if (RESOURCES[name]?.path !== `${prefix}/${name}`) return undefined;
  return { name, namespace, object, sub };
}

type Obj = {
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
};
interface Event {
  rv: number;
  resource: string;
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: Obj;
}

/** The test API server; objects survive {@linkcode stop}/{@linkcode start} like etcd would. */
export class TestApiServer {
  #rv = 1;
  readonly #objects = new Map<string, Map<string, Obj>>(Object.keys(RESOURCES).map((r) => [r, new Map()]));
  #history: Event[] = [];
  /** List bodies encoded at version {@linkcode #encodedAt}, by path and query. */
  readonly #encoded = new Map<string, Uint8Array>();
  #encodedAt = 0;
  /** Events at or below this version are compacted: watching from older versions gets 410. */
  #compactedAt = 0;
  #listener?: Deno.TcpListener;
  readonly #conns = new Set<Deno.Conn>();
  readonly #watchers = new Set<(e: Event) => void>();
  #port = 0;
  /** Watch requests served, for assertions about reconnects. */
  watchRequests = 0;
  listRequests = 0;
  /** Milliseconds between BOOKMARK events on open watches. */
  bookmarkEveryMs = 200;
  /** Resources this server does not serve (404), as an older API server: e.g. `servicecidrs` (1.33+). */
  readonly without: ReadonlySet<string>;
  /** Requests per resource (list and watch), for assertions about retries. */
  readonly requestsOf = new Map<string, number>();
  /** Faults: the next this many lists answer 500 (an etcd hiccup). */
  failLists = 0;
  /** Faults: the next list of this resource (e.g. `endpointslices`) is never answered (the client must give up). */
  hangListOf: string | undefined;
  /** Faults: requests arriving before this time (ms since the epoch) wait until then (a stall). */
  stallUntil = 0;
  /** Every request's RBAC attributes (an exec is a `get` and, since 1.35, a `create` of `pods/exec`). */
  readonly access: Access[] = [];
  /** Requests this returns true for are answered 403, as an authorizer denying them. */
  forbid: (a: Access) => boolean = () => false;
  /** What a pod exec does; undefined: every exec is 404 (no such pod). */
  onExec?: (r: ExecRequest) => ExecPlan;
  /** Exec messages are sent in two frames each (a continuation), as a proxy in between may. */
  fragmentExec = false;

  /** A server holding no object yet; `without` lists resources it answers 404 for. */
  constructor(o: { without?: readonly string[] } = {}) {
    this.without = new Set(o.without ?? []);
  }

  /** `events.k8s.io/v1` Events created (POSTed), with their namespace from the path. */
  readonly events: Array<{ namespace: string; event: Record<string, unknown> }> = [];

  /** Starts listening (on the previous port after a stop); returns the base URL. */
  start(): string {
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: this.#port });
    this.#port = (this.#listener.addr as Deno.NetAddr).port;
    const l = this.#listener;
    (async () => {
      try {
        for await (const c of l) {
          this.#conns.add(c);
          this.#serveConn(c).catch(() => {}).finally(() => {
            this.#conns.delete(c);
            try {
              c.close();
            } catch { /* closed */ }
          });
        }
      } catch { /* listener closed */ }
    })();
    return this.url;
  }

  /** The base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  /** Stops serving and drops every connection, as a crashed API server would. */
  stop(): Promise<void> {
    try {
      this.#listener?.close();
    } catch { /* closed */ }
    for (const w of [...this.#watchers]) w({ rv: -1 } as Event);
    for (const c of this.#conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    this.#conns.clear();
    return Promise.resolve();
  }

  /** Ends every open watch mid-stream (the connection closes); the server keeps serving. */
  dropWatches(): void {
    for (const w of [...this.#watchers]) w({ rv: -1 } as Event);
  }

  /** Forgets history so that watches from older versions must relist (410 Gone). */
  compact(): void {
    this.#compactedAt = this.#rv;
    this.#history = [];
  }

  /** Creates or replaces an object; returns its new resourceVersion. */
  apply(resource: string, obj: KubernetesObject): string {
    const o = structuredClone(obj) as Obj;
    const key = `${o.metadata.namespace ?? ""}/${o.metadata.name}`;
    const existed = this.#objects.get(resource)!.has(key);
    o.metadata.resourceVersion = String(++this.#rv);
    this.#objects.get(resource)!.set(key, o);
    this.#emit({ rv: this.#rv, resource, type: existed ? "MODIFIED" : "ADDED", object: o });
    return o.metadata.resourceVersion;
  }

  /** Deletes an object. */
  delete(resource: string, namespace: string | undefined, name: string): void {
    const key = `${namespace ?? ""}/${name}`;
    const o = this.#objects.get(resource)!.get(key);
    if (o === undefined) return;
    this.#objects.get(resource)!.delete(key);
    const gone = structuredClone(o);
    gone.metadata.resourceVersion = String(++this.#rv);
    this.#emit({ rv: this.#rv, resource, type: "DELETED", object: gone });
  }

  /**
   * The body of the list `request` asks for at the current version: encoded once per version, as
   * a real API server answers from its watch cache (the benches' starts then share the node's cores
   * with no list encoding, which a real cluster does on its control plane).
   */
  #listBody(request: string, encode: () => Uint8Array): Uint8Array {
    if (this.#encodedAt !== this.#rv) {
      this.#encoded.clear();
      this.#encodedAt = this.#rv;
    }
    let body = this.#encoded.get(request);
    if (body === undefined) this.#encoded.set(request, body = encode());
    return body;
  }

  #emit(e: Event): void {
    this.#history.push(e);
    for (const w of this.#watchers) w(e);
  }

  /** Serves HTTP/1.1 requests on one connection: lists keep it alive, a watch ends it. */
  async #serveConn(c: Deno.Conn): Promise<void> {
    const enc = new TextEncoder();
    let pending = "";
    const buf = new Uint8Array(16 * 1024);
    for (;;) {
      while (!pending.includes("\r\n\r\n")) {
        const n = await c.read(buf);
        if (n === null) return;
        pending += new TextDecoder().decode(buf.subarray(0, n));
      }
      const end = pending.indexOf("\r\n\r\n");
      const head = pending.slice(0, end);
      pending = pending.slice(end + 4);
      const [method, target] = head.split("\r\n")[0].split(" ");
      const url = new URL(target, "http://x");
      const write = (text: string) => writeAllText(c, enc.encode(text));
      // Polled, so a stall cut short ends for the requests already waiting too.
      while (Date.now() < this.stallUntil) await new Promise((r) => setTimeout(r, 50));
      if (method === "POST") {
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? "0");
        while (enc.encode(pending).length < length) {
          const n = await c.read(buf);
          if (n === null) return;
          pending += new TextDecoder().decode(buf.subarray(0, n));
        }
        const body = pending.slice(0, length);
        pending = pending.slice(length);
        const m = /^\/apis\/events\.k8s\.io\/v1\/namespaces\/([^/]+)\/events$/.exec(url.pathname);
        const status = m === null ? "404 Not Found" : "201 Created";
        if (m !== null) this.events.push({ namespace: decodeURIComponent(m[1]), event: JSON.parse(body) });
        const reply = m === null ? JSON.stringify({ kind: "Status", code: 404 }) : body;
        await write(
          `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${
            enc.encode(reply).length
          }\r\n\r\n${reply}`,
        );
        continue;
      }
      const at = route(url.pathname);
      if (at !== undefined) this.requestsOf.set(at.name, (this.requestsOf.get(at.name) ?? 0) + 1);
      const status = (code: number, message = "") => {
        const body = JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", code, message });
        const text = code === 403 ? "Forbidden" : "Not Found";
        return write(
          `HTTP/1.1 ${code} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
        );
      };
      if (at === undefined || this.without.has(at.name) || (at.sub !== undefined && at.sub !== "exec")) {
        await status(404);
        continue;
      }
      const verb = at.sub === "exec"
        ? "get"
        : at.object !== undefined
        ? "get"
        : url.searchParams.get("watch") === "true"
        ? "watch"
        : "list";
      const asked: Access[] = [{
        verb,
        resource: at.sub === undefined ? at.name : `${at.name}/${at.sub}`,
        namespace: at.namespace,
        ...(at.object === undefined ? {} : { name: at.object }),
      }];
      if (at.sub === "exec") asked.push({ ...asked[0], verb: "create" });
      this.access.push(...asked);
      const denied = asked.find(this.forbid);
      if (denied !== undefined) {
        await status(
          403,
          `${at.name} is forbidden: User "test" cannot ${denied.verb} resource "${denied.resource}" in namespace "${
            at.namespace ?? ""
          }"`,
        );
        continue;
      }
      const res = RESOURCES[at.name];
      const name = at.name;
      if (at.sub === "exec") {
        const request: ExecRequest = {
          namespace: at.namespace ?? "",
          pod: at.object!,
          container: url.searchParams.get("container") ?? "",
          command: url.searchParams.getAll("command"),
        };
        const known = this.#objects.get("pods")!.has(`${request.namespace}/${request.pod}`);
        const plan: ExecPlan = !known || this.onExec === undefined
          ? { refuse: { status: 404, reason: "NotFound", message: `pods "${request.pod}" not found` } }
          : this.onExec(request);
        await serveExec(c, head, request, plan, { fragment: this.fragmentExec });
        return;
      }
      if (at.object !== undefined) {
        const o = this.#objects.get(name)!.get(`${at.namespace ?? ""}/${at.object}`);
        if (o === undefined) {
          await status(404, `${name} "${at.object}" not found`);
          continue;
        }
        const body = enc.encode(JSON.stringify(withKind(res, o)));
        await write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
        );
        await writeAllText(c, body);
        continue;
      }
      const inNamespace = (o: Obj) => at.namespace === undefined || o.metadata.namespace === at.namespace;
      const selected = selector(url.searchParams.get("labelSelector"), url.searchParams.get("fieldSelector"));
      const match = (o: Obj) => inNamespace(o) && selected(o);
      if (url.searchParams.get("watch") !== "true") {
        if (name !== "servicecidrs") this.listRequests++;
        if (this.hangListOf === name) {
          this.hangListOf = undefined;
          // Held open, unanswered, until the client goes away.
          await c.read(new Uint8Array(1)).catch(() => null);
          return;
        }
        if (this.failLists > 0) {
          this.failLists--;
          const body = JSON.stringify({
            kind: "Status",
            code: 500,
            message: "etcdserver: request timed out",
          });
          await write(
            `HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
          );
          continue;
        }
        const body = this.#listBody(`${url.pathname}${url.search}`, () => {
          const items = [...this.#objects.get(name)!.values()].filter(match).map((o) => withKind(res, o));
          return enc.encode(JSON.stringify({
            kind: res.listKind,
            apiVersion: res.apiVersion,
            metadata: { resourceVersion: String(this.#rv) },
            items,
          }));
        });
        await write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
        );
        await writeAllText(c, body);
        continue;
      }
      this.watchRequests++;
      await this.#watch(c, name, res, match, Number(url.searchParams.get("resourceVersion") ?? "0"));
      return;
    }
  }

  /** Streams watch events as chunked newline-delimited JSON until the server stops. */
  async #watch(
    c: Deno.Conn,
    name: string,
    res: Resource,
    match: (o: Obj) => boolean,
    from: number,
  ): Promise<void> {
    const enc = new TextEncoder();
    const chunk = (o: unknown) => {
      const line = JSON.stringify(o) + "\n";
      return `${enc.encode(line).length.toString(16)}\r\n${line}\r\n`;
    };
    await writeAllText(
      c,
      enc.encode(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
      ),
    );
    if (from < this.#compactedAt) {
      await writeAllText(
        c,
        enc.encode(
          chunk({
            type: "ERROR",
            object: {
              kind: "Status",
              apiVersion: "v1",
              status: "Failure",
              reason: "Expired",
              code: 410,
              message: "too old resource version",
            },
          }) + "0\r\n\r\n",
        ),
      );
      return;
    }
    // Writes are serialized through one promise chain so chunks never interleave.
    let chain = Promise.resolve();
    const send = (text: string) => {
      chain = chain.then(() => writeAllText(c, enc.encode(text))).catch(() => {});
    };
    let stopped!: () => void;
    const done = new Promise<void>((r) => stopped = r);
    const watcher = (e: Event) => {
      if (e.rv === -1) return stopped();
      if (e.resource !== name || e.rv <= from || !match(e.object)) return;
      send(chunk({ type: e.type, object: withKind(res, e.object) }));
    };
    for (const e of this.#history) watcher(e);
    this.#watchers.add(watcher);
    const timer = setInterval(() =>
      send(chunk({
        type: "BOOKMARK",
        object: {
          kind: res.listKind.replace(/List$/, ""),
          apiVersion: res.apiVersion,
          metadata: { resourceVersion: String(this.#rv) },
        },
      })), this.bookmarkEveryMs);
    // The client going away also ends the watch.
    const clientGone = c.read(new Uint8Array(1)).then(() => {}, () => {});
    await Promise.race([done, clientGone]);
    clearInterval(timer);
    this.#watchers.delete(watcher);
  }
}

async function writeAllText(c: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await c.write(data.subarray(off));
}

function withKind(res: Resource, o: Obj): unknown {
  return { kind: res.listKind.replace(/List$/, ""), apiVersion: res.apiVersion, ...o };
}

/** Supports `!label`, `label=value` and `metadata.name=value`, comma-separated. */
function selector(labels: string | null, fields: string | null): (o: Obj) => boolean {
  const checks: Array<(o: Obj) => boolean> = [];
  for (const term of (labels ?? "").split(",").filter(Boolean)) {
    if (term.startsWith("!")) checks.push((o) => o.metadata.labels?.[term.slice(1)] === undefined);
    else {
      const [k, v] = term.split("=");
      checks.push((o) => o.metadata.labels?.[k] === v);
    }
  }
  for (const term of (fields ?? "").split(",").filter(Boolean)) {
    const [k, v] = term.split("=");
    if (k === "metadata.name") checks.push((o) => o.metadata.name === v);
  }
  return (o) => checks.every((c) => c(o));
}

/** Returns what a client of the server at `url` uses: that URL as `--master`, no kubeconfig, no environment. */
export function apiAccessTo(url: string): Promise<ApiAccess> {
  return loadApiAccess({ kubeconfig: "", master: url, env: () => undefined, readFile: Deno.readTextFile });
}
