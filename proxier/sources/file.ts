/**
 * The file source: Services, EndpointSlices and the own Node read from YAML/JSON files, followed
 * as they change.
 * @module
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { loadAll as loadAllYaml } from "js-yaml";
import { type Clock, realClock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { objectName } from "../runtime/errors.ts";
import { type ObjectProblem, ObjectWarnings } from "../model/object_warnings.ts";
import { type EventHandler, type KindHandler, kindHandlers, objectKey, selectedByProxy } from "./handlers.ts";
import { KIND_SHAPES, unknownFields } from "./known_fields.ts";
import { onAbort } from "../runtime/abort.ts";

/** Options of {@linkcode FileSource}. */
export interface FileSourceOptions {
  /** A YAML/JSON file or a directory of them. */
  readonly path: string;
  readonly nodeName: string;
  readonly handler: EventHandler;
  readonly log: Logger;
  /** Times the settling of bursts of edits; default the real clock. */
  readonly clock?: Clock;
  /**
   * Every file must read and parse (the offline commands): {@linkcode FileSource.load} rejects with a
   * {@linkcode SourceFileError} instead of going on without the file's objects. Default false (a
   * running proxy keeps a broken file's previous objects).
   */
  readonly strict?: boolean;
  /** Told once per change of a file that cannot be read or does not parse (a running proxy counts it). */
  readonly onBroken?: (path: string) => void;
}

/** A source file that cannot be read or does not parse: its path, the line when known, and why. */
export class SourceFileError extends Error {
  override readonly name = "SourceFileError";
  /** @param line 1-based, when the parser says. */
  constructor(readonly path: string, readonly line: number | undefined, readonly reason: string) {
    super(`${path}${line === undefined ? "" : `:${line}`}: ${reason}`);
  }
}

/**
 * Parses a source file's text into its documents.
 * @throws {SourceFileError} naming the file and the line where the YAML (or JSON) is broken.
 */
export function parseSourceText(text: string, path: string): unknown[] {
  try {
    return loadAllYaml(text);
  } catch (e) {
    const mark = (e as { mark?: { line: number } }).mark;
    throw new SourceFileError(path, mark ? mark.line + 1 : undefined, (e as Error).message.split("\n")[0]);
  }
}

/** The files `path` names: itself, or a directory's `.yaml`, `.yml` and `.json` files, sorted. */
export async function sourceFiles(path: string): Promise<string[]> {
  const info = await Deno.stat(path);
  if (!info.isDirectory) return [path];
  const out: string[] = [];
  for await (const e of Deno.readDir(path)) {
    const f = e.isFile ? sourcePath(path, e.name, true) : undefined;
    if (f !== undefined) out.push(f);
  }
  return out.sort();
}

/** Returns the source file `name` names under `path` (a manifest in the directory, or the file itself), if any. */
function sourcePath(path: string, name: string, dirMode: boolean): string | undefined {
  if (!dirMode) return name === basename(path) ? path : undefined;
  return /\.(ya?ml|json)$/.test(name) && !name.startsWith(".") ? `${path}/${name}` : undefined;
}

const KINDS = new Set(["Service", "EndpointSlice", "Node", "ServiceCIDR"]);

/** The annotation upstream's EndpointSlice controller sets; network programming latency starts there. */
const TRIGGER_TIME_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time";

/** Editors write in bursts (truncate, write, rename): a path is re-read once it is quiet this long. */
const SETTLE_MS = 100;
/**
 * ...and a file written in place (not replaced by a rename) once it has been quiet this long: a
 * writer that pauses mid-file must not have its half-written objects applied.
 */
const IN_PLACE_SETTLE_MS = 600;
/** ...but no later than this after the first event, however busy the directory stays. */
export const MAX_SETTLE_MS = 1000;

/**
 * When to read what the watcher named: once the paths have been quiet for {@linkcode SETTLE_MS}
 * ({@linkcode IN_PLACE_SETTLE_MS} after an in-place write), and never later than
 * {@linkcode MAX_SETTLE_MS} after the first event of a burst, however busy the directory stays.
 */
export class Settle {
  readonly #clock: Clock;
  readonly #fire: () => void;
  #cancel = () => {};
  #firstAt: number | undefined;
  #inPlace = false;

  /** `fire` runs when a burst has settled. */
  constructor(clock: Clock, fire: () => void) {
    this.#clock = clock;
    this.#fire = fire;
  }

  /** One watcher event; `inPlace`: a modification (the file may be half-written), not a rename. */
  event(inPlace: boolean): void {
    const now = this.#clock.now();
    this.#firstAt ??= now;
    if (inPlace) this.#inPlace = true;
    this.#cancel();
    const settle = this.#inPlace ? IN_PLACE_SETTLE_MS : SETTLE_MS;
    const latest = this.#firstAt + Math.max(MAX_SETTLE_MS, settle) - now;
    this.#cancel = this.#clock.setTimer(() => {
      this.#firstAt = undefined;
      this.#inPlace = false;
      this.#fire();
    }, Math.min(settle, Math.max(0, latest)));
  }

  /** Drops a burst not yet settled. */
  stop(): void {
    this.#cancel();
    this.#firstAt = undefined;
    this.#inPlace = false;
  }
}

/**
 * Reads Services, EndpointSlices, the own Node and ServiceCIDRs from files and follows changes to them. A file that
 * does not parse is reported by path and line, and its previous objects stay. After the first
 * read only the files the watcher names are read again, so an edit costs one file's parse
 * whatever the directory holds. When two files define the same object, the one whose path
 * sorts last wins; when one file defines it twice, the later document wins. Either is said, as are
 * fields the object's kind does not have (a misspelt `sessionAfinity` would otherwise leave a
 * Service without affinity and nothing saying why): once per object version, naming the files or
 * lines and the fields, where `kubectl apply` would have refused the object.
 */
export class FileSource {
  readonly #o: FileSourceOptions;
  readonly #h: ReturnType<typeof kindHandlers>;
  /** Objects per file, as last parsed successfully, keyed by `Kind/namespace/name`. */
  readonly #byFile = new Map<string, Map<string, KubernetesObject>>();
  /** Per object key, the files defining it, sorted. */
  readonly #owners = new Map<string, string[]>();
  /** The objects handlers last saw, keyed by `Kind/namespace/name`. */
  readonly #current = new Map<string, KubernetesObject>();
  /** Per file, the problem last reported (parse error, ignored kinds), so each is said once. */
  readonly #reported = new Map<string, { broken?: string; ignored?: string }>();
  /** Duplicates and unknown fields (keyed `file|Kind/ns/name`), conflicts between files (`Kind/ns/name`). */
  readonly #warnings: ObjectWarnings;

  /** Builds the source; reads nothing until {@linkcode load}. */
  constructor(opts: FileSourceOptions) {
    this.#o = opts;
    this.#h = kindHandlers(opts.handler);
    this.#warnings = new ObjectWarnings(opts.log);
  }

  /** Reads every file, delivers the objects and then the synced calls. */
  async load(): Promise<void> {
    await this.#readAll(false);
    this.#h.Service.synced();
    this.#h.EndpointSlice.synced();
    this.#h.Node.synced();
  }

  /**
   * Re-reads the files the watcher reports as they change, until `signal` aborts; everything
   * when the watcher lost events. EndpointSlices changed here get the file's modification time as
   * their trigger time (unless they carry one), so network programming latency is measured from
   * the edit.
   */
  async watch(signal: AbortSignal): Promise<void> {
    const info = await Deno.stat(this.#o.path);
    const dirMode = info.isDirectory;
    const dir = dirMode ? this.#o.path : dirname(this.#o.path);
    const watcher = Deno.watchFs(dir, { recursive: false });
    // Aborted already (a SIGTERM during the start): closed at once, the loop below ends at once.
    onAbort(signal, () => watcher.close());
    // Edits between load() and the watcher's start would otherwise be missed.
    await this.#readAll(true);
    const pending = new Set<string>();
    let rescan = false;
    let reading = Promise.resolve();
    const settle = new Settle(this.#o.clock ?? realClock, () => {
      const paths = [...pending];
      const all = rescan;
      pending.clear();
      rescan = false;
      // Reads run one after another, so a slow read never races a newer one of the same file.
      reading = reading.then(() => all ? this.#readAll(true) : this.#readPaths(paths))
        .catch((e) => this.#o.log.error("Reading source files failed", { error: String(e) }));
    });
    try {
      for await (const ev of watcher) {
        if (ev.flag === "rescan") rescan = true;
        for (const p of ev.paths) {
          const f = sourcePath(this.#o.path, basename(p), dirMode);
          if (f !== undefined) pending.add(f);
        }
        if (!rescan && pending.size === 0) continue;
        // Renames and creations bring whole files (instant); modifications may be half-written.
        settle.event(ev.kind === "modify");
      }
    } finally {
      settle.stop();
      await reading;
    }
  }

  /** Reads every file (files gone since the last read lose their objects). */
  async #readAll(trigger: boolean): Promise<void> {
    const files = await sourceFiles(this.#o.path);
    const present = new Set(files);
    for (const f of [...this.#byFile.keys()]) if (!present.has(f)) this.#apply(f, undefined, undefined);
    for (const f of files) await this.#readFile(f, trigger);
  }

  async #readPaths(paths: readonly string[]): Promise<void> {
    for (const f of [...paths].sort()) await this.#readFile(f, true);
  }

  /** Reads and parses `f`, then applies its objects; a file that vanished loses its objects. */
  async #readFile(f: string, trigger: boolean): Promise<void> {
    const { log, nodeName } = this.#o;
    let text: string;
    let mtime: Date | null = null;
    try {
      if (trigger) mtime = (await Deno.stat(f)).mtime;
      text = await Deno.readTextFile(f);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) {
        this.#reported.delete(f);
        return this.#apply(f, undefined, undefined);
      }
      if (e instanceof Deno.errors.IsADirectory) return;
      if (this.#o.strict) throw new SourceFileError(f, undefined, (e as Error).message);
      log.error("Cannot read source file; keeping its previous objects", { path: f, error: String(e) });
      this.#o.onBroken?.(f);
      return;
    }
    let docs: unknown[];
    const reported = this.#reported.get(f) ?? {};
    this.#reported.set(f, reported);
    try {
      docs = parseSourceText(text, f);
    } catch (e) {
      if (this.#o.strict || !(e instanceof SourceFileError)) throw e;
      // Said (and counted) once per change of the file: re-reading an unchanged broken file adds nothing.
      if (reported.broken !== text) {
        log.error("Source file does not parse; keeping its previous objects", {
          path: f,
          line: e.line,
          error: e.reason,
        });
        this.#o.onBroken?.(f);
      }
      reported.broken = text;
      return;
    }
    if (reported.broken !== undefined) log.info("Source file parses again", { path: f });
    reported.broken = undefined;
    const objects = new Map<string, KubernetesObject>();
    const problems = new Map<string, ObjectProblem[]>();
    const lineOf = new Map<string, number | undefined>();
    const ignored = new Set<string>();
    const lines = documentLines(text, docs.length);
    for (const [d, doc] of docs.entries()) {
      for (const item of expandList(doc)) {
        const o = item as KubernetesObject;
        if (o === null || o === undefined) continue; // an empty document (`---` twice)
        if (typeof o !== "object" || !KINDS.has(String(o.kind))) {
          ignored.add(typeof o === "object" ? String(o.kind ?? "(no kind)") : typeof o);
          continue;
        }
        if (o.kind === "Node" && o.metadata?.name !== nodeName) continue;
        // kube-proxy's label selector, as the API source asks the server to apply it.
        if (!selectedByProxy(o)) continue;
        const key = `${o.kind}/${objectKey(o)}`;
        const line = lines?.[d];
        const found: ObjectProblem[] = [];
        if (objects.has(key)) {
          const both = [lineOf.get(key), line].every((n) => n !== undefined)
            ? `${lineOf.get(key)}, ${line}`
            : undefined;
          found.push({
            msg: "Source file defines an object twice; the later one is used",
            fields: { path: f, object: describe(o), lines: both },
          });
        }
        const unknown = unknownFields(o, KIND_SHAPES[o.kind!]);
        if (unknown.length > 0) {
          found.push({
            msg: "Ignoring fields a source object's kind does not have (kubectl apply would refuse them)",
            fields: { path: f, line, object: describe(o), fields: unknown.join(", ") },
          });
        }
        objects.set(key, o);
        problems.set(key, found);
        lineOf.set(key, line);
      }
    }
    for (const [key, o] of objects) this.#warnings.report(`${f}|${key}`, o, problems.get(key)!);
    const kinds = [...ignored].sort().join(", ");
    if (kinds !== "" && kinds !== reported.ignored) {
      log.warn("Ignoring documents that are not Services, EndpointSlices, Nodes or ServiceCIDRs", {
        path: f,
        kinds,
      });
    }
    reported.ignored = kinds === "" ? undefined : kinds;
    this.#apply(f, objects, mtime?.toISOString());
  }

  /** Makes `objects` the content of `f` (undefined: gone) and tells handlers what changed. */
  #apply(
    f: string,
    objects: Map<string, KubernetesObject> | undefined,
    triggerTime: string | undefined,
  ): void {
    const old = this.#byFile.get(f);
    if (objects === undefined) this.#byFile.delete(f);
    else this.#byFile.set(f, objects);
    const keys = new Set([...(old?.keys() ?? []), ...(objects?.keys() ?? [])]);
    for (const k of keys) {
      let owners = this.#owners.get(k) ?? [];
      const has = objects?.has(k) ?? false;
      if (has && !owners.includes(f)) owners = [...owners, f].sort();
      else if (!has) {
        owners = owners.filter((x) => x !== f);
        this.#warnings.forget(`${f}|${k}`);
      }
      if (owners.length > 0) this.#owners.set(k, owners);
      else this.#owners.delete(k);
      this.#reportConflict(k, owners);
      const next = owners.length > 0 ? this.#byFile.get(owners.at(-1)!)!.get(k)! : undefined;
      const prev = this.#current.get(k);
      if (next === prev) continue;
      if (next === undefined) {
        this.#current.delete(k);
        this.#dispatch(prev!, "delete");
        continue;
      }
      this.#current.set(k, next);
      if (prev !== undefined && JSON.stringify(prev) === JSON.stringify(next)) continue;
      this.#dispatch(withTriggerTime(next, triggerTime), prev === undefined ? "add" : "update", prev);
    }
  }

  /** Says (once per version of the definitions) that more than one file defines object `k`. */
  #reportConflict(k: string, owners: readonly string[]): void {
    if (owners.length < 2) return this.#warnings.report(k, {}, []);
    const defined = owners.map((f) => this.#byFile.get(f)!.get(k)!);
    this.#warnings.report(k, { defined }, [{
      msg: "More than one source file defines an object; the file whose path sorts last is used",
      fields: { object: describe(defined.at(-1)!), files: owners.join(", "), used: owners.at(-1) },
    }]);
  }

  #dispatch(o: KubernetesObject, verb: "add" | "update" | "delete", old?: KubernetesObject): void {
    const h = this.#h[o.kind as "Service"] as KindHandler<KubernetesObject>;
    if (verb === "update") h.update(old!, o);
    else h[verb](o);
  }
}

/** Returns `o` with `time` as its trigger time when it is an EndpointSlice without one (a copy). */
function withTriggerTime(o: KubernetesObject, time: string | undefined): KubernetesObject {
  if (
    time === undefined || o.kind !== "EndpointSlice" || o.metadata?.annotations?.[TRIGGER_TIME_ANNOTATION]
  ) {
    return o;
  }
  const annotations = { ...o.metadata?.annotations, [TRIGGER_TIME_ANNOTATION]: time };
  return { ...o, metadata: { ...o.metadata, annotations } };
}

/** How messages name a source object: `Service "ns/name"`, or `Node "name"` for cluster-wide kinds. */
function describe(o: KubernetesObject): string {
  const clusterWide = o.kind === "Node" || o.kind === "ServiceCIDR";
  return clusterWide
    ? `${o.kind} "${o.metadata?.name}"`
    : objectName(String(o.kind), o.metadata?.namespace, o.metadata?.name);
}

/**
 * Returns the line (1-based) where each of a YAML text's `count` documents begins, as js-yaml's
 * loadAll splits them (a `---` line starts one, `...` ends one, content before the first marker is
 * the first): its first line of content, or its marker when it has none. Undefined when the count
 * differs (messages then go without lines).
 */
export function documentLines(text: string, count: number): number[] | undefined {
  const starts: number[] = [];
  /** The open document's line, and whether that is still its marker, waiting for content. */
  let open: number | undefined;
  let atMarker = false;
  for (const [i, line] of text.split("\n").entries()) {
    const marker = /^---(\s|$)/.test(line);
    if (marker || /^\.\.\.(\s|$)/.test(line)) {
      if (open !== undefined) starts.push(open);
      open = marker ? i + 1 : undefined;
      atMarker = marker && /^---\s*(#.*)?$/.test(line);
    } else if (!/^\s*(#.*)?$/.test(line) && !(open === undefined && line.startsWith("%"))) {
      if (open === undefined || atMarker) open = i + 1;
      atMarker = false;
    }
  }
  if (open !== undefined) starts.push(open);
  return starts.length === count ? starts : undefined;
}

/** A document's objects: a `List`'s items, else the document itself. */
export function expandList(doc: unknown): unknown[] {
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

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}
