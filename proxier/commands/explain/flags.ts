/**
 * `explain`'s arguments: the Service's name and its own flags, read into an {@linkcode ExplainQuery}.
 * @module
 */
import type { CommandArgs } from "../../command_definition.ts";
import { UsageError } from "../../runtime/errors.ts";
import { isDNSLabel } from "../../model/net.ts";
import type { FlagDef } from "../../options/flag_table.ts";
import { parseIP } from "../../options/values.ts";
import { commandFlag, nodeIPFlag, OUTPUT_FLAG, parseNodeIPs, parseOutput } from "../../read_side/flags.ts";

/** What `explain` is asked. */
export interface ExplainQuery {
  /** `namespace/name`. */
  readonly service: string;
  /** One port, by name or number; undefined: every port. */
  readonly port?: string;
  readonly output: "text" | "json";
  /** `--node-ip`: the rendered node's addresses (offline). */
  readonly nodeIPs?: readonly string[];
  /** `--client-ip`: a real client to ask about instead of the synthetic external one. */
  readonly clientIP?: string;
}

/** `explain`'s own flags. */
export const EXPLAIN_FLAGS: readonly FlagDef[] = [
  commandFlag("port", "NAME|NUMBER", "one port of the Service (default: every port)"),
  commandFlag(
    "client-ip",
    "IP",
    "ask about this client's connections (a real external client or pod) instead of a synthetic one",
  ),
  OUTPUT_FLAG,
  nodeIPFlag("the rendered node's addresses with --source (default: its Node object's)"),
];

/** Reads `explain`'s argument and flags. @throws {UsageError} naming what is wrong. */
export function parseExplainQuery({ positionals, given }: CommandArgs): ExplainQuery {
  const name = positionals[0];
  if (name === undefined) throw new UsageError("explain: needs the Service as NAMESPACE/NAME");
  const [ns, svc, ...rest] = name.split("/");
  if (rest.length > 0 || !isDNSLabel(ns) || !isDNSLabel(svc)) {
    throw new UsageError(`explain: ${JSON.stringify(name)} is not NAMESPACE/NAME`);
  }
  const output = parseOutput(given);
  const port = given("port");
  if (port !== undefined && !/^([a-z0-9]([-a-z0-9]*[a-z0-9])?)$/.test(port)) {
    throw new UsageError(`--port: invalid value ${JSON.stringify(port)} (a port name or number)`);
  }
  const nodeIPs = parseNodeIPs(given);
  const clientIP = given("client-ip");
  return {
    service: `${ns}/${svc}`,
    port,
    output,
    ...(nodeIPs === undefined ? {} : { nodeIPs }),
    ...(clientIP === undefined ? {} : { clientIP: parseIP("--client-ip", clientIP) }),
  };
}
