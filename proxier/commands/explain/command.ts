/**
 * The `explain` command's definition: its help, its flags, and its code, loaded when it runs.
 * @module
 */
import { type CommandDefinition, EXIT } from "../../command_definition.ts";
import { EXPLAIN_FLAGS, type ExplainQuery, parseExplainQuery } from "./flags.ts";

/** `kube-proxy-deno explain NAMESPACE/NAME`. */
export const explainCommand: CommandDefinition<ExplainQuery> = {
  name: "explain",
  help: {
    synopsis: "explain NAMESPACE/NAME [flags]",
    summary: "why each kind of client reaches the pods it reaches through a Service, proven by a trace",
    about: `For each port of the Service and each kind of client (a pod on this node, the node itself,
an external client on the NodePort, each external IP and each load-balancer IP, inside and outside
loadBalancerSourceRanges), prints the endpoints reached, why every other endpoint is not, what
happens instead when none is (REJECT, DROP), whether the source is masqueraded and why, and the
datapath's own answer: a trace of the connection through the rules. A difference is a
DISAGREEMENT; clients it cannot ask about are named, with why.

With --source=file:PATH it explains the rules render would write for those objects, for the
file's one Node (or --hostname-override's): no root, nothing touched. Otherwise it asks the proxy
running on this node at its metrics address (--metrics-bind-address; give the flags or --config
the proxy runs with), which answers from its own view and this node's live rules; the same JSON is
served there at GET /debug/services/NAMESPACE/NAME.

With --all-nodes it asks every node's running proxy, from a workstation, through the API server
alone and with the caller's kubeconfig (--kubeconfig, else $KUBECONFIG or ~/.kube/config, else the
in-cluster account): the proxy pods (--proxy-namespace, --proxy-selector: kubeadm's) each run this
explain by a pod exec, read only, a bounded number at once (--concurrency), each within
--node-timeout. One report for the cluster: per node the mode, the last sync, what each kind of
client reaches, whether its kernel agrees with its proxy and whether its proxy agrees with the API's
EndpointSlices; nodes behind or drifted first, every node not asked listed with why. The role it
needs is deploy/explain-rbac.yaml.`,
    related: [
      "source",
      "proxy-mode",
      "hostname-override",
      "cluster-cidr",
      "metrics-bind-address",
      "config",
      "kubeconfig",
    ],
  },
  exits: [
    [
      EXIT.ok,
      "every client checked, and the datapath agrees with the model (--all-nodes: on every node, each with the API)",
    ],
    [
      EXIT.failed,
      "a DISAGREEMENT (--all-nodes: a node behind the API or whose kernel disagrees); or the Service, the rules or the proxy cannot be read, or the source file does not parse",
    ],
    [
      EXIT.usage,
      "bad input: a flag, an argument, a port the Service lacks, a file that does not exist, no one node to act for",
    ],
    [EXIT.notChecked, "nothing disagrees, but some client (--all-nodes: some node) was not checked or asked"],
  ],
  flags: EXPLAIN_FLAGS,
  maxPositionals: 1,
  positionalsSay: "explain takes one NAMESPACE/NAME",
  parse: parseExplainQuery,
  run: async (query, context) => (await import("./explain.ts")).runExplain(query, context),
};
