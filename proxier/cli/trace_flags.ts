/**
 * `trace`'s command line: its flags read into a {@linkcode TraceQuery} (its `--help` is `usage.ts`'s).
 * @module
 */
import { UsageError } from "../errors.ts";
import { INTERFACE } from "../options/validation.ts";
import { parseInteger, parseIP, parseIPList } from "../options/values.ts";
import type { TraceQuery } from "../trace/packet.ts";

/** Reads the `trace` flags. @throws {UsageError} naming the flag. */
export function parseTraceQuery(
  given: (name: string) => string | undefined,
): Omit<TraceQuery, "modeChosen"> {
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
  const output = given("output") ?? "text";
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output: invalid value ${JSON.stringify(output)} (text or json)`);
  }
  const nodeIP = given("node-ip");
  const nodeIPs = nodeIP === undefined ? [] : parseIPList("--node-ip", nodeIP);
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
