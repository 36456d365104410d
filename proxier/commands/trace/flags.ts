/**
 * `trace`'s own flags, read into a {@linkcode TraceQuery}.
 * @module
 */
import type { CommandArgs } from "../../command_definition.ts";
import { UsageError } from "../../runtime/errors.ts";
import { DEFAULT_SOURCE_PORT } from "../../options/config.ts";
import type { FlagDef } from "../../options/flag_table.ts";
import { INTERFACE } from "../../options/validation.ts";
import { parseInteger, parseIP } from "../../options/values.ts";
import {
  commandFlag,
  nodeIPFlag,
  OUTPUT_FLAG,
  parseNodeIPs,
  parseOutput,
  RULES_FLAG,
} from "../../read_side/flags.ts";
import type { TraceQuery } from "../../trace/packet.ts";

/** What the command line asks `trace` (whether the mode was chosen is the configuration's to say). */
export type TraceArgs = Omit<TraceQuery, "modeChosen">;

/** `trace`'s own flags. */
export const TRACE_FLAGS: readonly FlagDef[] = [
  commandFlag("dst", "IP", "destination address (a cluster IP, node address, external or load-balancer IP)"),
  commandFlag("dport", "N", "destination port"),
  commandFlag("proto", "tcp|udp|sctp", "the protocol", "tcp"),
  commandFlag(
    "from",
    "node|pod|external",
    "who opens the connection: a process on this node (the default without --src), a pod on this node " +
      "(the default with --src), or another host",
  ),
  commandFlag("src", "IP", "source address (default for --from=node: the node's address of the family)"),
  commandFlag("sport", "N", "source port, which the sh and mh schedulers hash", String(DEFAULT_SOURCE_PORT)),
  commandFlag(
    "in-interface",
    "NAME",
    "the interface a packet from a pod or another host comes in on, for rules that tell pod traffic by " +
      "interface; default: the one the route to --src uses, else for --from=pod the bridge, or the prefix with 0",
  ),
  RULES_FLAG,
  OUTPUT_FLAG,
  nodeIPFlag(
    "the node's addresses: the rendered node's with --source (default: its Node object's), the live " +
      "node's (default: this machine's interfaces)",
  ),
];

/** Reads the `trace` flags. @throws {UsageError} naming the flag. */
export function parseTraceQuery({ given }: CommandArgs): TraceArgs {
  const dst = given("dst");
  if (dst === undefined) throw new UsageError("--dst: trace needs the destination address");
  parseIP("--dst", dst);
  const dport = given("dport");
  if (dport === undefined) throw new UsageError("--dport: trace needs the destination port");
  const port = parseInteger("--dport", dport, 1, 65535);
  const proto = given("proto") ?? "tcp";
  if (proto !== "tcp" && proto !== "udp" && proto !== "sctp") {
    throw new UsageError(`--proto: invalid value ${JSON.stringify(proto)} (tcp, udp or sctp)`);
  }
  const src = given("src");
  const sportText = given("sport");
  const sport = sportText === undefined ? undefined : parseInteger("--sport", sportText, 1, 65535);
  const from = given("from") ?? (src === undefined ? "node" : "pod");
  if (from !== "pod" && from !== "node" && from !== "external") {
    throw new UsageError(`--from: invalid value ${JSON.stringify(from)} (pod, node or external)`);
  }
  if (src !== undefined) parseIP("--src", src);
  else if (from !== "node") throw new UsageError(`--src: trace --from=${from} needs the source address`);
  const output = parseOutput(given);
  const nodeIPs = parseNodeIPs(given) ?? [];
  const inInterface = given("in-interface");
  if (inInterface !== undefined && !INTERFACE.test(inInterface)) {
    throw new UsageError(
      `--in-interface: invalid interface name ${
        JSON.stringify(inInterface)
      } (at most 15 letters, digits, "_", ".", "@" or "-")`,
    );
  }
  if (inInterface !== undefined && from === "node") {
    throw new UsageError("--in-interface: a packet from this node (--from=node) comes in on no interface");
  }
  return {
    src,
    dst,
    port,
    protocol: proto,
    ...(sport === undefined ? {} : { sport }),
    from,
    inInterface,
    rulesFile: given("rules"),
    output,
    nodeIPs,
  };
}
