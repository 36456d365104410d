/**
 * `explain NAMESPACE/NAME --all-nodes`: from a workstation (or a pod), through the API server alone
 * and with the caller's own credentials: the Service and its EndpointSlices read, the proxy pods
 * found (`proxy_pods.ts`), each node's proxy asked for its `explain` report through a pod exec
 * (`ask_node.ts`), a bounded number at a time and each within a deadline, the API read again, and
 * one report for the cluster printed (`cluster_report.ts`, `format.ts`).
 * @module
 */
import type { V1EndpointSlice, V1Node, V1Pod, V1Service } from "@kubernetes/client-node";
import { type CommandContext, CommandFailure, EXIT, type ExitCode } from "../../../command_definition.ts";
import { WatchError } from "../../../runtime/errors.ts";
import { readSideApiAccess } from "../../../read_side/api_access.ts";
import { ApiClient } from "../../../sources/api_client.ts";
import type { ApiAccess } from "../../../sources/api_access.ts";
import { SERVICE_NAME_LABEL } from "../../../model/endpoint.ts";
import { type ApiView, apiView } from "./api_view.ts";
import { askNode, type NodeAnswer } from "./ask_node.ts";
import { clusterExit, clusterReport } from "./cluster_report.ts";
import { formatCluster } from "./format.ts";
import { nodeNames, type ProxyPod, proxyPodsByNode } from "./proxy_pods.ts";

/** What `explain --all-nodes` is asked. */
export interface ClusterQuery {
  readonly service: string;
  readonly port?: string;
  readonly clientIP?: string;
  readonly output: "text" | "json";
  /** Where the proxy pods run, and the label selector that finds them. */
  readonly namespace: string;
  readonly selector: string;
  /** Each node's deadline, connection to answer. */
  readonly nodeTimeoutMs: number;
  /** How many nodes are asked at once. */
  readonly concurrency: number;
}

/** Each node's answer is at most this large (a report on a Service with thousands of endpoints fits). */
export const MAX_NODE_ANSWER_BYTES = 16 * 1024 * 1024;

/** The role `explain --all-nodes` needs, as deploy/ ships it. */
const RBAC = "deploy/explain-rbac.yaml";

/**
 * Prints the cluster's report; returns 0 when every node was asked and agrees with the API and its
 * kernel, 1 for a node behind, drifted or claimed, 3 when some node could not be asked or checked.
 * @throws {CommandFailure} usage for a kubeconfig that cannot be read or a port the Service lacks;
 * failed for a Service the API does not have or an API that refuses or fails a read.
 */
export async function runClusterExplain(q: ClusterQuery, context: CommandContext): Promise<ExitCode> {
  const access = await readSideApiAccess(context, "--all-nodes reaches the cluster through its API");
  const api = new ApiClient(access);
  const [namespace, name] = q.service.split("/");
  const askedAtMs = Date.now();
  const before = await readService(api, namespace, name, q.port);
  const [pods, nodes] = await Promise.all([
    read(api.list<V1Pod>(`/api/v1/namespaces/${q.namespace}/pods`, { labelSelector: q.selector }), {
      what: `pods in ${q.namespace} (selector ${q.selector})`,
      verb: "list",
    }),
    read(api.list<V1Node>("/api/v1/nodes"), { what: "nodes", verb: "list" }),
  ]);
  const byNode = proxyPodsByNode(pods.items);
  const answers: Array<NodeAnswer | (() => Promise<NodeAnswer>)> = [];
  for (const node of [...new Set([...nodeNames(nodes.items), ...byNode.keys()])].sort()) {
    const here = byNode.get(node) ?? [];
    if (here.length === 0) {
      answers.push({
        node,
        notAsked: "no-pod",
        detail: `no proxy pod on this node (none in ${q.namespace} with ${q.selector})`,
      });
    }
    for (const pod of here) {
      answers.push(
        pod.notRunning !== undefined
          ? { node, pod, notAsked: "not-ready", detail: `pod ${pod.pod}: ${pod.notRunning}` }
          : () => ask(access, q, pod, context.stop),
      );
    }
  }
  const settled = await boundedAll(answers, q.concurrency);
  const after = await readService(api, namespace, name, q.port);
  const report = clusterReport({
    service: q.service,
    port: q.port,
    askedAtMs,
    proxies: { namespace: q.namespace, selector: q.selector },
    before,
    after,
    answers: settled,
  });
  context.stdout(q.output === "json" ? JSON.stringify(report, null, 2) + "\n" : formatCluster(report));
  return clusterExit(report);
}

function ask(access: ApiAccess, q: ClusterQuery, pod: ProxyPod, signal?: AbortSignal): Promise<NodeAnswer> {
  return askNode(access, q.namespace, pod, q, {
    deadlineMs: q.nodeTimeoutMs,
    maxOutputBytes: MAX_NODE_ANSWER_BYTES,
    signal,
  });
}

/** Runs the deferred answers `limit` at a time; returns every answer in order. */
async function boundedAll(
  items: ReadonlyArray<NodeAnswer | (() => Promise<NodeAnswer>)>,
  limit: number,
): Promise<NodeAnswer[]> {
  const out: NodeAnswer[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      const item = items[i];
      out[i] = typeof item === "function" ? await item() : item;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

/** The API's view of the Service. @throws {CommandFailure} for a Service it lacks or cannot give. */
async function readService(api: ApiClient, namespace: string, name: string, port?: string): Promise<ApiView> {
  const [svc, slices] = await Promise.all([
    read(api.get<V1Service>(`/api/v1/namespaces/${namespace}/services/${name}`), {
      what: `Service ${namespace}/${name}`,
      verb: "get",
    }),
    read(
      api.list<V1EndpointSlice>(`/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`, {
        labelSelector: `${SERVICE_NAME_LABEL}=${name}`,
      }),
      { what: `EndpointSlices of ${namespace}/${name}`, verb: "list" },
    ),
  ]);
  if (svc === undefined) throw new CommandFailure(EXIT.failed, `the API has no Service ${namespace}/${name}`);
  const view = apiView(svc, slices.items, port);
  if (view.ports.length > 0) return view;
  if (port !== undefined && apiView(svc, slices.items).ports.length > 0) {
    throw new CommandFailure(EXIT.usage, `Service ${namespace}/${name} has no port ${JSON.stringify(port)}`);
  }
  throw new CommandFailure(
    EXIT.failed,
    `Service ${namespace}/${name} has no port a proxy serves (headless, ExternalName, or no cluster IP)`,
  );
}

/** A read of the API, its failure named. */
async function read<T>(p: Promise<T>, o: { what: string; verb: string }): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (!(e instanceof WatchError)) throw e;
    const why = e.statusCode === 403
      ? `the API refuses to ${o.verb} ${o.what} to these credentials (403); ${RBAC} is the role --all-nodes needs`
      : `cannot ${o.verb} ${o.what}: ${e.message}`;
    throw new CommandFailure(EXIT.failed, why, { cause: e });
  }
}
