/**
 * `explain`'s arguments: the Service's name and its own flags, read into an {@linkcode ExplainQuery}.
 * @module
 */
import type { CommandArgs } from "../../command_definition.ts";
import { UsageError } from "../../runtime/errors.ts";
import { isDNSLabel } from "../../model/net.ts";
import type { FlagDef } from "../../options/flag_table.ts";
import { parseDuration } from "../../options/duration.ts";
import { parseInteger, parseIP } from "../../options/values.ts";
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
  /** `--all-nodes`: every node's running proxy asked through the API, and where to find them. */
  readonly allNodes?: {
    readonly namespace: string;
    readonly selector: string;
    readonly nodeTimeoutMs: number;
    readonly concurrency: number;
  };
}

/** The flags only `--all-nodes` reads. */
const CLUSTER_ONLY = ["proxy-namespace", "proxy-selector", "node-timeout", "concurrency"];

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
  {
    ...commandFlag(
      "all-nodes",
      "bool",
      "ask every node's running proxy through the API server (pod exec, the caller's kubeconfig) and report the cluster",
      "false",
    ),
    bool: true,
  },
  commandFlag("proxy-namespace", "NAMESPACE", "with --all-nodes: where the proxy pods run", "kube-system"),
  commandFlag(
    "proxy-selector",
    "SELECTOR",
    "with --all-nodes: the label selector of the proxy pods",
    "k8s-app=kube-proxy",
  ),
  commandFlag("node-timeout", "duration", "with --all-nodes: how long one node may take to answer", "1m30s"),
  commandFlag("concurrency", "int", "with --all-nodes: how many nodes are asked at once", "10"),
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
  const allNodes = parseAllNodes(given);
  if (allNodes !== undefined && (nodeIPs !== undefined || given("source")?.startsWith("file:"))) {
    throw new UsageError(
      `--all-nodes asks the running proxies through the API: not with ${
        nodeIPs !== undefined ? "--node-ip" : "--source=file:"
      }`,
    );
  }
  return {
    service: `${ns}/${svc}`,
    port,
    output,
    ...(nodeIPs === undefined ? {} : { nodeIPs }),
    ...(clientIP === undefined ? {} : { clientIP: parseIP("--client-ip", clientIP) }),
    ...(allNodes === undefined ? {} : { allNodes }),
  };
}

/** `--all-nodes` and the flags only it reads. @throws {UsageError} naming a bad one, or one given without it. */
function parseAllNodes(given: CommandArgs["given"]): ExplainQuery["allNodes"] {
  const on = given("all-nodes");
  if (on === undefined || on === "false") {
    const stray = CLUSTER_ONLY.find((f) => given(f) !== undefined);
    if (stray !== undefined) throw new UsageError(`--${stray} is read only with --all-nodes`);
    return undefined;
  }
  if (on !== "true") throw new UsageError(`--all-nodes: invalid boolean ${JSON.stringify(on)}`);
  const namespace = given("proxy-namespace") ?? "kube-system";
  if (!isDNSLabel(namespace)) {
    throw new UsageError(`--proxy-namespace: invalid namespace ${JSON.stringify(namespace)}`);
  }
  const selector = given("proxy-selector") ?? "k8s-app=kube-proxy";
  if (selector.trim() === "") {
    throw new UsageError("--proxy-selector: empty (every pod of the namespace is no proxy)");
  }
  const timeout = given("node-timeout") ?? "1m30s";
  const nodeTimeoutMs = parseDuration(timeout);
  if (nodeTimeoutMs === undefined || nodeTimeoutMs <= 0) {
    throw new UsageError(`--node-timeout: invalid duration ${JSON.stringify(timeout)} (e.g. 30s, 1m30s)`);
  }
  const concurrency = parseInteger("--concurrency", given("concurrency") ?? "10", 1, 1000);
  return { namespace, selector, nodeTimeoutMs, concurrency };
}
