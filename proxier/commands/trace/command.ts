/**
 * The `trace` command's definition: its help, its flags, and its code, loaded when it runs.
 * @module
 */
import { type CommandDefinition, EXIT } from "../../command_definition.ts";
import { parseTraceQuery, TRACE_FLAGS, type TraceArgs } from "./flags.ts";

/** `kube-proxy-deno trace --dst IP --dport N`. */
export const traceCommand: CommandDefinition<TraceArgs> = {
  name: "trace",
  help: {
    synopsis: "trace --dst IP --dport N [flags]",
    summary: "where one new connection goes through the rules: each rule hit, the endpoints, the verdict",
    about: `Prints the rules one new connection hits, the endpoints it can reach with their shares,
whether it is masqueraded, and the verdict (DNAT, REJECT, DROP, or not a service). Reads this
node's live rules (read only; needs root), a file of rules (--rules), or, with
--source=file:PATH, the rules render writes for those objects; changes nothing.`,
    related: [
      "source",
      "proxy-mode",
      "hostname-override",
      "iptables-backend",
      "detect-local-mode",
      "pod-bridge-interface",
      "pod-interface-name-prefix",
      "config",
    ],
  },
  exits: [
    [EXIT.ok, "traced"],
    [EXIT.failed, "the rules cannot be read, or the source file does not parse"],
    [
      EXIT.usage,
      "bad input: a flag, a --rules or source file that does not exist, a mode without a tracer, no one " +
      "node to act for",
    ],
  ],
  flags: TRACE_FLAGS,
  maxPositionals: 0,
  positionalsSay: "trace takes flags only",
  parse: parseTraceQuery,
  run: async (query, context) => (await import("./trace.ts")).runTrace(query, context),
};
