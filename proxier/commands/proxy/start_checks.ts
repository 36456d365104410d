/**
 * What the proxy refuses before it touches the node, beyond the configuration: with a file source,
 * a file that does not parse (one typo would otherwise program an empty table and, on a node
 * switching modes, take every Service off it) and a source that names no one node to act for
 * (`sources/file_node.ts`, the rule every command follows).
 * @module
 */
import { type CommandContext, CommandFailure, EXIT } from "../../command_definition.ts";
import { fileSourceNode, sourceNodeNames } from "../../sources/file_node.ts";

/**
 * Returns the node the proxy acts for: the file source's (its one Node, `--hostname-override`'s when
 * the file holds it or no Node, this machine's hostname, said, when it holds none and no override is
 * given), else the context's.
 * @throws {CommandFailure} exit 1 for a source file that cannot be read or does not parse (FILE:LINE
 * and the reason), 2 for no one node to act for (naming the Nodes and the flag).
 */
export async function nodeToActFor(c: CommandContext): Promise<string> {
  const { source } = c.config;
  if (source.kind !== "file") return c.nodeName;
  const unchanged = "nothing on this node was changed";
  let nodes: string[];
  try {
    nodes = await sourceNodeNames(source.path);
  } catch (e) {
    throw new CommandFailure(EXIT.failed, `--source: ${(e as Error).message}; ${unchanged}`, { cause: e });
  }
  const chosen = fileSourceNode(nodes, c.config.hostnameOverride, c.nodeName);
  if ("error" in chosen) throw new CommandFailure(EXIT.usage, `${chosen.error}; ${unchanged}`);
  if (chosen.assumed !== undefined) c.log.warn(chosen.assumed);
  return chosen.node;
}
