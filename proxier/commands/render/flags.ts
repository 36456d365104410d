/**
 * `render`'s own flag, read into a {@linkcode RenderQuery}.
 * @module
 */
import type { CommandArgs } from "../../command_definition.ts";
import type { FlagDef } from "../../options/flag_table.ts";
import { nodeIPFlag, parseNodeIPs } from "../../read_side/flags.ts";

/** What `render` is asked: the rendered node's addresses (`--node-ip`), else its Node object's. */
export interface RenderQuery {
  readonly nodeIPs?: readonly string[];
}

/** `render`'s own flags. */
export const RENDER_FLAGS: readonly FlagDef[] = [
  nodeIPFlag("the rendered node's addresses (default: its Node object's)"),
];

/** Reads `render`'s flags. @throws {UsageError} naming the flag. */
export function parseRenderQuery({ given }: CommandArgs): RenderQuery {
  return { nodeIPs: parseNodeIPs(given) };
}
