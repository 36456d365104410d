/**
 * The `render` command's definition: its help, its flag, and its code, loaded when it runs.
 * @module
 */
import { type CommandDefinition, EXIT } from "../../command_definition.ts";
import { parseRenderQuery, RENDER_FLAGS, type RenderQuery } from "./flags.ts";

/** `kube-proxy-deno render --source=file:PATH`. */
export const renderCommand: CommandDefinition<RenderQuery> = {
  name: "render",
  help: {
    synopsis: "render --source=file:PATH [flags]",
    summary: "the exact batches a full sync of --proxy-mode would apply, touching nothing",
    about: `Prints on stdout exactly what a full sync of --proxy-mode would apply for the objects of
the file source, computed by the real proxier on a dry run: no root, nothing touched. It acts for
the file's one Node (or --hostname-override's); the node addresses it used, and the warnings a
running proxy would log, go to stderr. A file that does not parse is an error naming its line.`,
    related: ["source", "proxy-mode", "hostname-override", "cluster-cidr", "config"],
  },
  exits: [
    [EXIT.ok, "rendered"],
    [EXIT.failed, "the source file does not parse (its line is named)"],
    [EXIT.usage, "bad input: a flag, no file source or one that does not exist, no one node to act for"],
  ],
  flags: RENDER_FLAGS,
  maxPositionals: 0,
  positionalsSay: "render takes flags only",
  parse: parseRenderQuery,
  run: async (query, context) => (await import("./render.ts")).runRender(query, context),
};
