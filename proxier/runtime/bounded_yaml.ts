/**
 * Every YAML and JSON input the program reads (the file source, `--config`, the kubeconfig) is
 * parsed here, within limits: a hostile or broken file is refused with its line and the limit's
 * name, never expanded until the node runs out of memory. js-yaml keeps an alias as a reference to
 * its anchor, so a small file of nested aliases parses cheaply and explodes only when the objects
 * are walked, copied or compared: the expansion is measured here, over the references, in time
 * linear in the distinct nodes, before any caller walks it.
 * @module
 */
import { CORE_SCHEMA, loadAll, mergeTag } from "js-yaml";

/** The limits of one input (a file), each refused by name. */
export interface YamlLimits {
  /** Bytes of text. */
  readonly maxBytes: number;
  /** Documents (`---`-separated). */
  readonly maxDocuments: number;
  /** Nesting of collections, as written and as expanded through aliases. */
  readonly maxDepth: number;
  /** Alias nodes (`*ref`) per document. */
  readonly maxAliases: number;
  /** Keys merged by `<<` in the whole input. */
  readonly maxMergeKeys: number;
  /** Nodes of one document once every alias is expanded (what a walk of it visits). */
  readonly maxExpandedNodes: number;
  /** Characters of one scalar. */
  readonly maxScalarChars: number;
}

/**
 * The program's limits: far above any real manifest (a 50,000-Service source is about 60 MiB in
 * 100,000 documents of depth 10 without an alias; an annotation's whole value is at most 256 KiB in
 * the API), far below what would take a node's memory.
 */
export const YAML_LIMITS: YamlLimits = {
  maxBytes: 256 * 1024 * 1024,
  maxDocuments: 500_000,
  maxDepth: 64,
  maxAliases: 1_000,
  maxMergeKeys: 10_000,
  maxExpandedNodes: 1_000_000,
  maxScalarChars: 4 * 1024 * 1024,
};

/** A YAML input that does not parse or breaks a limit: the line (1-based, when known), why, and which limit. */
export class YamlInputError extends Error {
  override readonly name = "YamlInputError";
  /** @param limit the {@linkcode YamlLimits} field broken, when it is a limit. */
  constructor(readonly line: number | undefined, readonly reason: string, readonly limit?: keyof YamlLimits) {
    super(line === undefined ? reason : `line ${line}: ${reason}`);
  }
}

/** js-yaml's own limits, by the option its message names. */
const JS_YAML_LIMITS: ReadonlyArray<readonly [string, keyof YamlLimits]> = [
  ["maxAliases", "maxAliases"],
  ["maxDepth", "maxDepth"],
  ["maxTotalMergeKeys", "maxMergeKeys"],
];

/**
 * Parses `text` (YAML, or JSON, which is YAML) into its documents within `limits`; merge keys (`<<`)
 * merge, as kubectl's YAML does.
 * @throws {YamlInputError} for text that does not parse or breaks a limit, with the line.
 */
export function loadAllBounded(text: string, limits: YamlLimits = YAML_LIMITS): unknown[] {
  if (text.length > limits.maxBytes) {
    throw new YamlInputError(
      undefined,
      `${text.length} bytes, over the limit of ${limits.maxBytes} (maxBytes)`,
      "maxBytes",
    );
  }
  // Counted before the parse, which holds an event per document: a marker in a block scalar counts
  // too, so this errs towards refusing only near the limit.
  const markers = countMarkers(text);
  if (markers > limits.maxDocuments) {
    throw new YamlInputError(
      undefined,
      `at least ${markers} documents, over the limit of ${limits.maxDocuments} (maxDocuments)`,
      "maxDocuments",
    );
  }
  let docs: unknown[];
  try {
    docs = loadAll(text, {
      schema: CORE_SCHEMA.withTags(mergeTag),
      maxDepth: limits.maxDepth,
      maxAliases: limits.maxAliases,
      maxTotalMergeKeys: limits.maxMergeKeys,
    });
  } catch (e) {
    const mark = (e as { mark?: { line: number } }).mark;
    const first = (e as Error).message.split("\n")[0].replace(/ \(\d+:\d+\)$/, "");
    const limit = JS_YAML_LIMITS.find(([option]) => first.includes(option))?.[1];
    throw new YamlInputError(
      mark === undefined ? undefined : mark.line + 1,
      limit ? `${first} (${limit})` : first,
      limit,
    );
  }
  if (docs.length > limits.maxDocuments) {
    throw new YamlInputError(
      undefined,
      `${docs.length} documents, over the limit of ${limits.maxDocuments} (maxDocuments)`,
      "maxDocuments",
    );
  }
  const lines = documentLines(text, docs.length);
  docs.forEach((d, i) => checkExpansion(d, limits, lines?.[i]));
  return docs;
}

/**
 * Parses `text` as one document within `limits` (an empty text is null).
 * @throws {YamlInputError} as {@linkcode loadAllBounded}, and for more than one document.
 */
export function loadBounded(text: string, limits: YamlLimits = YAML_LIMITS): unknown {
  const docs = loadAllBounded(text, limits);
  if (docs.length > 1) throw new YamlInputError(undefined, `${docs.length} documents where one is expected`);
  return docs[0] ?? null;
}

/** The lines of `text` that start a document (`---`), counted without splitting the text. */
function countMarkers(text: string): number {
  let n = text.startsWith("---") ? 1 : 0;
  for (let at = text.indexOf("\n---"); at >= 0; at = text.indexOf("\n---", at + 4)) n++;
  return n;
}

/**
 * Refuses a document whose expansion (every alias walked as a copy) is larger or deeper than the
 * limits, or that holds a scalar over the limit. Each distinct node is measured once: a node's
 * expanded size is its own plus its children's, remembered per node.
 */
function checkExpansion(doc: unknown, limits: YamlLimits, line: number | undefined): void {
  const size = new Map<object, number>();
  const depth = new Map<object, number>();
  const refuse = (reason: string, limit: keyof YamlLimits) => {
    throw new YamlInputError(line, `${reason} (${limit})`, limit);
  };
  // Post-order without recursion: a node is measured once all its children are.
  const stack: Array<{ node: object; children: unknown[]; next: number }> = [];
  const enter = (v: unknown): number => {
    if (typeof v === "string" && v.length > limits.maxScalarChars) {
      refuse(
        `a scalar of ${v.length} characters, over the limit of ${limits.maxScalarChars}`,
        "maxScalarChars",
      );
    }
    if (v === null || typeof v !== "object") return 1;
    if (size.has(v)) return size.get(v)!;
    stack.push({ node: v, children: Array.isArray(v) ? v : Object.values(v), next: 0 });
    return -1;
  };
  if (enter(doc) > 0) return;
  while (stack.length > 0) {
    const top = stack.at(-1)!;
    if (stack.length > limits.maxDepth) {
      refuse(`nested deeper than ${limits.maxDepth} once aliases are expanded`, "maxDepth");
    }
    if (top.next < top.children.length) {
      enter(top.children[top.next++]);
      continue;
    }
    stack.pop();
    let total = 1;
    let deepest = 0;
    for (const c of top.children) {
      const isNode = c !== null && typeof c === "object";
      total += isNode ? size.get(c)! : 1;
      if (isNode) deepest = Math.max(deepest, depth.get(c)!);
    }
    if (total > limits.maxExpandedNodes) {
      refuse(
        `expands to more than ${limits.maxExpandedNodes} nodes through its aliases (${
          size.size + 1
        } distinct)`,
        "maxExpandedNodes",
      );
    }
    if (deepest + 1 > limits.maxDepth) {
      refuse(`nested deeper than ${limits.maxDepth} once aliases are expanded`, "maxDepth");
    }
    size.set(top.node, total);
    depth.set(top.node, deepest + 1);
  }
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
