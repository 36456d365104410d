/**
 * `explain`'s command line: the Service's name and the flags read into an {@linkcode ExplainQuery},
 * and `explain --help`.
 * @module
 */
import type { ExplainQuery } from "../commands/explain/explain.ts";
import { UsageError } from "../errors.ts";
import { isDNSLabel } from "../net.ts";
import { parseIPList } from "../options/values.ts";

/** Usage text for `explain --help`. */
export const EXPLAIN_USAGE = `Usage: kube-proxy-deno explain NAMESPACE/NAME [flags]

Says why each kind of client reaches the pods it reaches through a Service, on this node: for each
port, a pod on this node and the node itself (cluster IP), an external client (the NodePort, each
external and load-balancer IP, inside and outside loadBalancerSourceRanges), each IP family. For
each it prints the endpoints reached, why every other endpoint is not (not ready, terminating,
topology hints, a Local traffic policy), what happens instead when none is (REJECT, DROP), whether
the source is masqueraded and why, and the datapath's own answer: a trace of the connection through
the rules. A difference is a DISAGREEMENT, and the exit code is 1.

With --source=file:PATH it explains the rules render would write for those objects (no root);
otherwise it asks the proxy running on this node (its metrics port, --metrics-bind-address), which
answers from its own view and this node's live rules. The same JSON is served there at
GET /debug/services/NAMESPACE/NAME.

Flags:
  --port NAME|NUMBER    one port of the Service (default: every port)
  --output FORMAT       text (default) or json (schema kube-proxy-deno.explain/v1)
  --node-ip IP[,IP]     with --source=file: the rendered node's addresses (default: its Node's)
  --proxy-mode MODE     the mode whose rules to explain (with --source=file; default iptables)
  --hostname-override   the node whose endpoints are local (with --source=file)
`;

/** Reads `explain`'s argument and flags. @throws {UsageError} naming what is wrong. */
export function parseExplainQuery(
  name: string | undefined,
  given: (flag: string) => string | undefined,
): ExplainQuery {
  if (name === undefined) throw new UsageError("explain: needs the Service as NAMESPACE/NAME");
  const [ns, svc, ...rest] = name.split("/");
  if (rest.length > 0 || !isDNSLabel(ns) || !isDNSLabel(svc)) {
    throw new UsageError(`explain: ${JSON.stringify(name)} is not NAMESPACE/NAME`);
  }
  const output = given("output") ?? "text";
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output: invalid value ${JSON.stringify(output)} (text or json)`);
  }
  const port = given("port");
  if (port !== undefined && !/^([a-z0-9]([-a-z0-9]*[a-z0-9])?)$/.test(port)) {
    throw new UsageError(`--port: invalid value ${JSON.stringify(port)} (a port name or number)`);
  }
  const nodeIP = given("node-ip");
  return {
    service: `${ns}/${svc}`,
    port,
    output,
    ...(nodeIP === undefined ? {} : { nodeIPs: parseIPList("--node-ip", nodeIP) }),
  };
}
