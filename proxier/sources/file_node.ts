/**
 * Which node a file source stands for: the one rule every command and the running proxy follow, so
 * which endpoints are local and the node's addresses are never guessed.
 * @module
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { expandList, parseSourceText, readSourceText, SourceFileError, sourceFiles } from "./file_text.ts";

/**
 * Returns the names of the Nodes the source at `path` defines, sorted.
 * @throws {SourceFileError} for a file that cannot be read or does not parse.
 */
export async function sourceNodeNames(path: string): Promise<string[]> {
  const names = new Set<string>();
  for (const f of await sourceFiles(path)) {
    let text: string;
    try {
      text = (await readSourceText(f)).text;
    } catch (e) {
      if (e instanceof SourceFileError) throw e;
      throw new SourceFileError(f, undefined, (e as Error).message, { cause: e });
    }
    for (const doc of parseSourceText(text, f)) {
      for (const item of expandList(doc)) {
        const o = item as KubernetesObject | null;
        if (o?.kind === "Node" && typeof o.metadata?.name === "string") names.add(o.metadata.name);
      }
    }
  }
  return [...names].sort();
}

/** The node a file source stands for, or why there is none (exit 2: the flag is the operator's to give). */
export type FileSourceNode =
  | { readonly node: string; readonly assumed?: string }
  | { readonly error: string };

/**
 * Returns the node the file source with Nodes `nodes` stands for: `--hostname-override`'s when given
 * (`override`, "" when not) and the file holds no Node or holds that one; else the file's one Node.
 * An override naming none of the file's Nodes, or several Nodes and no override, is an error naming
 * the Nodes and the flag. A file with no Node and no override: `machine` (the running proxy passes
 * this machine's hostname, as upstream names its node, and says so: `assumed`), else an error (the
 * offline commands, which may run anywhere).
 */
export function fileSourceNode(nodes: readonly string[], override: string, machine?: string): FileSourceNode {
  const list = nodes.length === 0
    ? "the source defines no Node"
    : `the source defines ${nodes.length === 1 ? "one Node" : `${nodes.length} Nodes`} (${nodes.join(", ")})`;
  if (override !== "") {
    return nodes.length === 0 || nodes.includes(override)
      ? { node: override }
      : { error: `--hostname-override: "${override}" names no Node of the source: ${list}` };
  }
  if (nodes.length === 1) return { node: nodes[0] };
  if (nodes.length === 0 && machine !== undefined) {
    return {
      node: machine,
      assumed:
        `${list}: acting as this machine's hostname "${machine}" (--hostname-override names another); ` +
        "without its Node object the node's addresses are unknown, so NodePorts answer on every address",
    };
  }
  return { error: `--hostname-override: ${list}; name the node to act for` };
}
