/**
 * The file source: Services, EndpointSlices and the own Node read from YAML/JSON files, followed
 * as they change.
 * @module
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { documentLines } from "../runtime/bounded_yaml.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { objectName } from "../runtime/errors.ts";
import { type ObjectProblem, ObjectWarnings } from "../model/object_warnings.ts";
import { type EventHandler, type KindHandler, kindHandlers, objectKey, selectedByProxy } from "./handlers.ts";
import { KIND_SHAPES, unknownFields } from "./known_fields.ts";
import {
  basename,
  dirname,
  expandList,
  parseSourceText,
  readSourceText,
  SourceFileError,
  sourceFiles,
  sourcePath,
} from "./file_text.ts";
import { watchFiles, type WriteTracker } from "./file_watch.ts";
import { keptReason, type SourceKept } from "./file_kept.ts";

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
  /**
   * Told once per change refused (a file that cannot be read or does not parse, a source that
   * vanished, emptied or lost the Node it acts for): a running proxy counts it.
   */
  readonly onBroken?: (path: string) => void;
  /** Told when the running source's changes stop being applied (why, since when), and when they are again. */
  readonly onKept?: (kept: SourceKept | undefined) => void;
}

const KINDS = new Set(["Service", "EndpointSlice", "Node", "ServiceCIDR"]);

/** One file as read: its objects keyed by `Kind/namespace/name`, their problems, its modification time. */
interface FileRead {
  readonly objects: Map<string, KubernetesObject>;
  readonly problems: ReadonlyMap<string, ObjectProblem[]>;
  /** Set when the read is a change (not the first load): the objects' trigger time. */
  readonly mtime: Date | null;
}

/** The annotation upstream's EndpointSlice controller sets; network programming latency starts there. */
const TRIGGER_TIME_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time";

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
  /** The key of the Node the proxy acts for, as objects are keyed. */
  readonly #nodeKey: string;
  /** Files that cannot be read or do not parse, with why (their previous objects stay). */
  readonly #broken = new Map<string, string>();
  /** True once the first load is in: from then on a change the start would refuse is not applied. */
  #loaded = false;
  /** Why the running source's changes are not applied, since when; undefined while they are. */
  #kept: SourceKept | undefined;

  /** Builds the source; reads nothing until {@linkcode load}. */
  constructor(opts: FileSourceOptions) {
    this.#o = opts;
    this.#h = kindHandlers(opts.handler);
    this.#warnings = new ObjectWarnings(opts.log);
    this.#nodeKey = `Node/${opts.nodeName}`;
  }

  /** Reads every file, delivers the objects and then the synced calls. */
  async load(): Promise<void> {
    await this.#read("all", false);
    this.#h.Service.synced();
    this.#h.EndpointSlice.synced();
    this.#h.Node.synced();
    this.#loaded = true;
  }

  /**
   * Re-reads the files the watcher reports as their writers close them (or rename them into
   * place), until `signal` aborts; everything when the watch starts again or lost events.
   * EndpointSlices changed here get the file's modification time as their trigger time (unless they
   * carry one), so network programming latency is measured from the edit.
   */
  async watch(signal: AbortSignal): Promise<void> {
    const { path } = this.#o;
    const dirMode = await Deno.stat(path).then((i) => i.isDirectory, () => false);
    await watchFiles({
      dir: dirMode ? path : dirname(path),
      match: (p) => sourcePath(path, basename(p), dirMode),
      signal,
      log: this.#o.log,
      clock: this.#o.clock,
      onSettled: (paths, tracker) => this.#read(paths, true, tracker),
    });
  }

  /**
   * Reads `paths` (or every file) and applies what they hold as one change, unless the running
   * source would then stand for something its start would refuse (`file_kept.ts`): then every
   * previous object stays. A read that a new write overtook (`tracker`) is left for the next one.
   */
  async #read(paths: readonly string[] | "all", trigger: boolean, tracker?: WriteTracker): Promise<void> {
    const reads = new Map<string, FileRead | undefined>();
    let files: readonly string[];
    if (paths === "all") {
      try {
        files = await sourceFiles(this.#o.path);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound) || !this.#loaded) throw e;
        return this.#keep(`${JSON.stringify(this.#o.path)} is gone`);
      }
      for (const f of this.#byFile.keys()) if (!files.includes(f)) reads.set(f, undefined);
    } else files = [...paths].sort();
    for (const f of files) {
      const events = tracker?.count(f);
      const r = await this.#readFile(f, trigger);
      if (tracker !== undefined && (tracker.count(f) !== events || tracker.isOpen(f))) {
        tracker.again(f);
        continue;
      }
      if (r !== "broken") reads.set(f, r === "gone" ? undefined : r);
    }
    const refused = this.#loaded ? keptReason(this.#byFile, reads, this.#o.path, this.#nodeKey) : undefined;
    if (refused !== undefined) return this.#keep(refused);
    for (const [f, r] of reads) {
      if (r !== undefined) this.#warnAbout(f, r);
      this.#apply(f, r?.objects, r?.mtime?.toISOString());
    }
    if (this.#kept !== undefined && this.#broken.size === 0) {
      this.#o.log.info("Source usable again; applying it", { path: this.#o.path });
      this.#kept = undefined;
      this.#o.onKept?.(undefined);
    }
  }

  /** Refuses a change of the running source: says why once per reason, counts it, keeps every object. */
  #keep(reason: string): void {
    this.#o.onBroken?.(this.#o.path);
    if (this.#kept?.reason === reason) return;
    this.#o.log.error("Source change refused; keeping the objects last applied", {
      path: this.#o.path,
      reason,
    });
    this.#kept = { reason, since: this.#kept?.since ?? new Date() };
    this.#o.onKept?.(this.#kept);
  }

  /**
   * Reads and parses `f` into its objects: "gone" when it vanished, "broken" when it cannot be
   * read or does not parse (said once per change of its text; its previous objects stay).
   */
  async #readFile(f: string, trigger: boolean): Promise<FileRead | "gone" | "broken"> {
    const { log, nodeName } = this.#o;
    let text: string;
    let mtime: Date | null;
    try {
      ({ text, mtime } = await readSourceText(f));
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) {
        this.#reported.delete(f);
        this.#brokenFile(f, undefined);
        return "gone";
      }
      if (this.#o.strict) throw e;
      log.error("Cannot read source file; keeping its previous objects", { path: f, error: String(e) });
      this.#brokenFile(f, `cannot read ${f}: ${(e as Error).message}`);
      return "broken";
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
        this.#brokenFile(f, e.message);
      }
      reported.broken = text;
      return "broken";
    }
    if (reported.broken !== undefined) log.info("Source file parses again", { path: f });
    reported.broken = undefined;
    this.#brokenFile(f, undefined);
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
    const kinds = [...ignored].sort().join(", ");
    if (kinds !== "" && kinds !== reported.ignored) {
      log.warn("Ignoring documents that are not Services, EndpointSlices, Nodes or ServiceCIDRs", {
        path: f,
        kinds,
      });
    }
    reported.ignored = kinds === "" ? undefined : kinds;
    return { objects, problems, mtime: trigger ? mtime : null };
  }

  /** Says the problems of `f`'s objects (once per object version). */
  #warnAbout(f: string, r: FileRead): void {
    for (const [key, o] of r.objects) this.#warnings.report(`${f}|${key}`, o, r.problems.get(key)!);
  }

  /** Records whether `f` is broken (`why`) or not (undefined), and counts a new breakage. */
  #brokenFile(f: string, why: string | undefined): void {
    if (why === undefined) {
      this.#broken.delete(f);
      return;
    }
    this.#broken.set(f, why);
    this.#o.onBroken?.(f);
    if (this.#loaded) {
      this.#kept = { reason: why, since: this.#kept?.since ?? new Date() };
      this.#o.onKept?.(this.#kept);
    }
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
