/**
 * `explain --all-nodes` over a three-node cluster of network namespaces: node-a and node-b each run
 * the real program (`deno task start`, iptables on node-a, nftables on node-b, each from its own
 * objects file), node-c has a Node object and no proxy pod. The test API server holds the cluster's
 * objects and the proxy pods; its pod exec runs the command it is given (`kube-proxy-deno explain
 * ... --config=...`) in the pod's node namespace, so each answer is the running proxy's own, from its
 * view and its live kernel rules. Healthy with two nodes: exit 0. Then node-c joins without a pod
 * (exit 3), the Service's endpoints change in the API and in node-b's file only, so node-a's proxy is
 * stale, and one element of node-b's kernel rules is deleted: node-a is named BEHIND, node-b DRIFTED,
 * first, node-c NOT ASKED, exit 1.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { CONVERGE_MS } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import { TestApiServer } from "../support/api_server.ts";
import { runOnce, startArgs } from "../support/program.ts";
import {
  CLUSTER_CIDR,
  CLUSTER_IP,
  nodeObject,
  objectsFile,
  proxyPod,
  SERVICE,
  webService,
  webSlice,
  writeKubeconfig,
} from "../support/proxy_cluster.ts";
import type { ClusterReport } from "../../proxier/commands/explain/cluster/cluster_report.ts";
import { Topology } from "./netns.ts";

const kernel = await realKernel(["nft", "iptables-nft-save", "iptables-nft-restore"]);

const BEFORE = ["10.180.1.2", "10.180.2.2"];
const AFTER = ["10.180.1.2", "10.180.3.2"];

Deno.test({
  name:
    `e2e explain --all-nodes: a stale node, a drifted node and a node without a proxy pod, each named, exit 1; healthy, exit 0${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const api = new TestApiServer();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-cluster-" });
    try {
      await t.init();
      const second = await t.addSecondNode();
      const nodes = [
        { name: "node-a", ns: t.node, ip: t.nodeIP, mode: "iptables" },
        { name: "node-b", ns: second.ns, ip: second.ip, mode: "nftables" },
      ];
      const firstChange = Date.now() - 120_000;
      const write = async (name: string, ip: string, endpoints: readonly string[], triggerMs: number) => {
        // Written aside and renamed in, as an operator's tooling replaces a file.
        await Deno.writeTextFile(
          `${dir}/${name}.next`,
          objectsFile(nodeObject(name, ip), webService(), webSlice(endpoints, triggerMs)),
        );
        await Deno.rename(`${dir}/${name}.next`, `${dir}/${name}/objects.yaml`);
      };
      api.apply("services", webService());
      api.apply("endpointslices", webSlice(BEFORE, firstChange));
      const pods = new Map<string, string>();
      for (const n of nodes) {
        await Deno.mkdir(`${dir}/${n.name}`);
        await write(n.name, n.ip, BEFORE, firstChange);
        // The proxy's configuration as a ConfigMap gives it; a sync period of an hour: no periodic
        // resync repairs the deleted rule before it is asked about.
        const config = `${dir}/${n.name}.conf`;
        await Deno.writeTextFile(
          config,
          `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ${n.mode}
clusterCIDR: ${CLUSTER_CIDR}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
syncPeriod: 1h
`,
        );
        api.apply("nodes", nodeObject(n.name, n.ip));
        api.apply("pods", proxyPod(`kube-proxy-${n.name}`, n.name, config));
        pods.set(`kube-proxy-${n.name}`, n.ns);
        const p = t.startProxy([
          `--config=${config}`,
          `--source=file:${dir}/${n.name}/objects.yaml`,
          `--hostname-override=${n.name}`,
        ], n.ns);
        await eventually(() => assert(/First sync in the kernel/.test(p.log()), p.log()), CONVERGE_MS);
      }
      // The API's exec: the command the client sends, run in the pod's node namespace as the
      // program runs there (the image's kube-proxy-deno is `deno task start`).
      api.onExec = (r) => {
        const ns = pods.get(r.pod)!;
        return r.command[0] === "kube-proxy-deno"
          ? {
            run: {
              cmd: "ip",
              args: ["netns", "exec", ns, Deno.execPath(), ...startArgs(r.command.slice(1))],
            },
          }
          : { fail: `exec: "${r.command[0]}": executable file not found in $PATH: unknown` };
      };
      const kubeconfig = await writeKubeconfig(dir, api.start(), "operator-token");
      const ask = async (output: "json" | "text") => {
        const out = await runOnce([
          "explain",
          SERVICE,
          "--all-nodes",
          `--kubeconfig=${kubeconfig}`,
          `--output=${output}`,
        ]);
        return { ...out, report: output === "json" ? JSON.parse(out.stdout) as ClusterReport : undefined };
      };

      const healthy = await ask("json");
      assertEquals(healthy.code, 0, `${healthy.stdout}\n${healthy.stderr}`);
      assertEquals(
        healthy.report!.nodes.map((n) => [n.node, n.verdict, n.mode, n.api.agrees, n.kernel.agrees]),
        [
          ["node-a", "agrees", "iptables", true, true],
          ["node-b", "agrees", "nftables", true, true],
        ],
      );
      for (const n of healthy.report!.nodes) {
        assert(n.lastSync !== null && n.lastSyncAgeSeconds! >= 0, "a running proxy's last sync is reported");
        for (const l of n.reach) {
          assertEquals([l.reaches, l.by], ["10.180.1.2:8080, 10.180.2.2:8080", "kernel"], l.client);
        }
      }

      api.apply("nodes", nodeObject("node-c", "192.168.0.4"));
      const withoutPod = await ask("json");
      assertEquals(withoutPod.code, 3, withoutPod.stderr);
      assertEquals(withoutPod.report!.notAsked.map((n) => [n.node, n.reason]), [["node-c", "no-pod"]]);

      // The endpoints change; node-b's proxy sees it, node-a's does not (its file stays as it was).
      const change = Date.now() - 30_000;
      api.apply("endpointslices", webSlice(AFTER, change));
      await write("node-b", second.ip, AFTER, change);
      await eventually(async () => {
        const here = await t.runProgram(
          ["explain", SERVICE, "--output=json", `--config=${dir}/node-b.conf`],
          second.ns,
        );
        assertMatch(here.stdout, /10\.180\.3\.2:8080/);
      }, CONVERGE_MS);
      // Drift on node-b: its cluster IP's element deleted behind its proxy's back.
      await t.exec(second.ns, [
        "nft",
        "delete",
        "element",
        "ip",
        "kube-proxy",
        "service-ips",
        `{ ${CLUSTER_IP} . tcp . 80 }`,
      ]);

      const json = await ask("json");
      assertEquals(json.code, 1, json.stderr);
      const r = json.report!;
      assertEquals(r.nodes.map((n) => [n.node, n.verdict]), [["node-a", "behind"], ["node-b", "drifted"]]);
      assertEquals(r.notAsked.map((n) => [n.node, n.reason]), [["node-c", "no-pod"]]);
      const [a, b] = r.nodes;
      assertEquals(a.api.differences, [
        "http 80/TCP IPv4: lacks endpoint 10.180.3.2:8080 (ready)",
        "http 80/TCP IPv4: holds endpoint 10.180.2.2:8080 (ready) the API removed",
      ]);
      assert(a.api.behindSeconds! >= 30, `behind since the change 30 s ago: ${a.api.behindSeconds}`);
      assertEquals(a.kernel.agrees, true, "node-a's kernel does what its (stale) proxy says");
      const stale = a.reach.find((l) => l.client.startsWith("a pod on this node"))!;
      assertEquals(
        stale.reaches,
        "10.180.1.2:8080, 10.180.2.2:8080",
        "node-a still sends traffic to the old pod",
      );
      assertEquals(b.api.agrees, true);
      assert(b.kernel.disagreements > 0, JSON.stringify(b.kernel));
      assert(
        b.kernel.details.some((d) => d.includes(CLUSTER_IP) || d.startsWith("a pod on this node")),
        b.kernel.details.join("\n"),
      );

      const text = await ask("text");
      assertEquals(text.code, 1);
      const heads = text.stdout.split("\n").filter((l) =>
        /^(BEHIND|DRIFTED|NOT ASKED|AGREES|NOT CHECKED)/.test(l)
      );
      assertEquals(heads.map((l) => l.split(" (")[0].split(":")[0]), [
        "BEHIND node-a",
        "DRIFTED node-b",
        "NOT ASKED node-c",
      ]);
      assertMatch(
        text.stdout,
        /^3 nodes: 0 agree, 1 behind the API, 1 with a kernel that disagrees, 0 claimed, 0 not checked, 1 not asked$/m,
      );
    } finally {
      await api.stop();
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
