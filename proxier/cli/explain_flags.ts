/**
 * `explain`'s command line: the Service's name and the flags read into an {@linkcode ExplainQuery}
 * (its `--help` is `usage.ts`'s).
 * @module
 */
import type { ExplainQuery } from "../commands/explain/explain.ts";
import { UsageError } from "../errors.ts";
import { isDNSLabel } from "../net.ts";
import { parseIP, parseIPList } from "../options/values.ts";

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
  const clientIP = given("client-ip");
  return {
    service: `${ns}/${svc}`,
    port,
    output,
    ...(nodeIP === undefined ? {} : { nodeIPs: parseIPList("--node-ip", nodeIP) }),
    ...(clientIP === undefined ? {} : { clientIP: parseIP("--client-ip", clientIP) }),
  };
}
