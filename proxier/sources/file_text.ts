/**
 * The file source's files and their text: which files a `--source=file:` path names, each read
 * within the YAML limits (a file over the size limit, or one that is not a regular file such as a
 * FIFO or a device, is refused before it is read) and parsed into its documents.
 * @module
 */
import { loadAllBounded, YAML_LIMITS, YamlInputError } from "../runtime/bounded_yaml.ts";

/** A source file that cannot be read or does not parse: its path, the line when known, and why. */
export class SourceFileError extends Error {
  override readonly name = "SourceFileError";
  /** @param line 1-based, when the parser says. */
  constructor(
    readonly path: string,
    readonly line: number | undefined,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`${path}${line === undefined ? "" : `:${line}`}: ${reason}`, options);
  }
}

/**
 * Parses a source file's text into its documents, within the program's YAML limits.
 * @throws {SourceFileError} naming the file and the line where the YAML (or JSON) is broken or a
 * limit is passed (and the limit's name).
 */
export function parseSourceText(text: string, path: string): unknown[] {
  try {
    return loadAllBounded(text);
  } catch (e) {
    if (!(e instanceof YamlInputError)) throw e;
    throw new SourceFileError(path, e.line, e.reason, { cause: e });
  }
}

/**
 * Reads source file `f`: only a regular file, only within the size limit (checked before reading).
 * @throws {Deno.errors.NotFound} when it is gone; {@linkcode SourceFileError} when it is not a
 * regular file, is too large, or cannot be read.
 */
export async function readSourceText(
  f: string,
): Promise<{ readonly text: string; readonly mtime: Date | null }> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(f);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw e;
    throw new SourceFileError(f, undefined, (e as Error).message, { cause: e });
  }
  if (!info.isFile) throw new SourceFileError(f, undefined, "not a regular file");
  if (info.size > YAML_LIMITS.maxBytes) {
    throw new SourceFileError(
      f,
      undefined,
      `${info.size} bytes, over the limit of ${YAML_LIMITS.maxBytes} (maxBytes)`,
    );
  }
  try {
    return { text: await Deno.readTextFile(f), mtime: info.mtime };
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw e;
    throw new SourceFileError(f, undefined, (e as Error).message, { cause: e });
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
export function sourcePath(path: string, name: string, dirMode: boolean): string | undefined {
  if (!dirMode) return name === basename(path) ? path : undefined;
  return /\.(ya?ml|json)$/.test(name) && !name.startsWith(".") ? `${path}/${name}` : undefined;
}

/** A document's objects: a `List`'s items, else the document itself. */
export function expandList(doc: unknown): unknown[] {
  const d = doc as { kind?: string; items?: unknown[] } | null;
  return d !== null && typeof d === "object" && typeof d.kind === "string" && d.kind.endsWith("List") &&
      Array.isArray(d.items)
    ? d.items
    : [doc];
}

/** The directory part of `p` (`.` for a bare name). */
export function dirname(p: string): string {
  const i = p.lastIndexOf("/");
  return i <= 0 ? (i === 0 ? "/" : ".") : p.slice(0, i);
}

/** The last part of `p`. */
export function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}
