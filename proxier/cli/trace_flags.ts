/**
 * `trace`'s command line: its flags read into a {@linkcode TraceQuery}, and `trace --help`.
 * @module
 */
import { UsageError } from "../errors.ts";
import { INTERFACE } from "../options/validation.ts";
import { parseInteger, parseIP, parseIPList } from "../options/values.ts";
import { DEFAULT_SOURCE_PORT, type TraceQuery } from "../trace/packet.ts";

/** Usage text for `trace --help`. */
export const TRACE_USAGE = `Usage: kube-proxy-deno trace --dst IP --dport N [flags]

Says where one new connection goes through this node's service rules: the rules it hits, the
endpoints it can reach with their shares, whether it is masqueraded, and the verdict (DNAT,
REJECT, DROP, or not a service). Reads the live rules (read only; needs root) or a file, and
changes nothing.

Flags:
  --dst IP              destination address (a cluster IP, node address, external or LB IP)
  --dport N             destination port
  --proto P             tcp (default), udp or sctp
  --from WHERE          node (default without --src: a process on this node), pod (a pod on this
                        node; the default with --src) or external (another host)
  --src IP              source address (default for --from=node: the node's address of the family)
  --sport N             source port, which the sh and mh schedulers hash (default ${DEFAULT_SOURCE_PORT})
  --in-interface NAME   the interface the packet comes in on (--from pod|external), for rules that
                        tell pod traffic by interface (--detect-local-mode=BridgeInterface or
                        InterfaceNamePrefix); default: the one the route to --src uses, else for
                        --from=pod the bridge, or the prefix with "0"
  --node-ip IP[,IP]     this node's addresses (default: this machine's interfaces)
  --rules FILE          trace the rules of a file (a render output, or iptables-save output)
                        instead of the live ones
  --proxy-mode MODE     the mode whose rules to read (iptables, nftables, ipvs); default: the
                        mode whose rules the node (or the --rules file) holds
  --output FORMAT       text (default) or json
`;

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
