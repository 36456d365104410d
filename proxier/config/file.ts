/**
 * The file source: Services, EndpointSlices and the own Node read from YAML/JSON files, followed
 * as they change.
 * @module
 */
import { type KubernetesObject, loadAllYaml } from "@kubernetes/client-node";
import type { Logger } from "../logger.ts";
import { type EventHandler, type KindHandler, kindHandlers, objectKey } from "./handlers.ts";

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
