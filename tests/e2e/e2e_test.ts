/**
 * End to end, real kernel: for every mode, one node namespace runs the real program (started as
 * `deno task start` starts it) on a file source holding every applicable scenario's objects; pods
 * on veth pairs, client hosts and a second node on the node's external link. Then each scenario of
 * `scenarios.ts` runs as a step. Everything lives in namespaces this test creates and removes.
 */
import { e2eTest } from "./mode_test_body.ts";

/**
 * Per mode: the flags that differ (every run adds the source, node name and server addresses) and
 * the tools its scenarios need (conntrack: the stale-UDP scenario; sysctl: NodePorts on 127.0.0.1).
 */
const MODES: ReadonlyArray<{ mode: string; args: string[]; tools: string[] }> = [
  {
    mode: "iptables",
    args: ["--cluster-cidr=10.180.0.0/16", "--iptables-min-sync-period=100ms"],
    tools: ["iptables-restore", "iptables-save", "conntrack", "sysctl"],
  },
  {
    mode: "nftables",
    args: ["--cluster-cidr=10.180.0.0/16", "--iptables-min-sync-period=100ms"],
    tools: ["nft", "conntrack"],
  },
  {
    mode: "userspace",
    args: ["--proxy-port-range=40000-40100", "--iptables-min-sync-period=100ms"],
    tools: ["iptables-restore", "iptables-save"],
  },
];

for (const { mode, args, tools } of MODES) await e2eTest(mode, args, tools);
