/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): the ipvs mode rolled back to
 * upstream. Stopped, it leaves only objects upstream's ipvs mode names (its sets, its chains, its
 * kube-ipvs0; the REJECT and DROP guards of ours are rules in its KUBE-IPVS-FILTER, which its first
 * restore rewrites), and upstream's nftables start (its cleanup of the iptables and ipvs modes, the
 * stand-in written from its code) leaves nothing of either.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { eventually } from "../../support/net_helpers.ts";
import { CONVERGE_MS, IN_VM } from "../../support/bounds.ts";
import { Topology } from "../../e2e/netns.ts";
import { NetnsExecutor } from "../../support/namespace.ts";
import {
  UPSTREAM_IPVS_CHAINS,
  UPSTREAM_IPVS_SETS,
  upstreamStart,
} from "../../support/upstream_kube_proxy.ts";

const OBJECTS = (podIP: string) =>
  `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec:
  clusterIP: 172.30.0.10
  clusterIPs: [172.30.0.10]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [${podIP}], conditions: { ready: true }, nodeName: node-a }
---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: empty }
spec:
  clusterIP: 172.30.0.11
  clusterIPs: [172.30.0.11]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: local }
spec:
  type: NodePort
  externalTrafficPolicy: Local
  clusterIP: 172.30.0.12
  clusterIPs: [172.30.0.12]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30012 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: local-1, labels: { kubernetes.io/service-name: local } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [10.180.200.9], conditions: { ready: true }, nodeName: node-b }
`;

Deno.test({
  name:
    "ipvs rollback: only upstream's names stay when stopped; upstream's nftables start leaves nothing of ipvs",
  ignore: !IN_VM,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir();
    try {
      await t.init();
      const pod = await t.addPod("pod-a", 8080);
      await Deno.writeTextFile(`${dir}/objects.yaml`, OBJECTS(pod.ip));
      const proxy = t.startProxy([
        "--proxy-mode=ipvs",
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--cluster-cidr=10.180.0.0/16",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
      ]);
      try {
        await eventually(
          async () => assertEquals(await t.nodeAgent.tcp("172.30.0.10", 80), "pod-a"),
          CONVERGE_MS,
        );
        // The guard of the Service without endpoints answers at once.
        const refused = await t.nodeAgent.tcp("172.30.0.11", 80, 2000);
        assert(/refused/i.test(refused), refused);
      } finally {
        await proxy.stop();
      }
      const sets = (await t.exec(t.node, ["ipset", "list", "-n"])).split("\n").filter((l) => l !== "");
      assertEquals(
        sets.filter((s) => !UPSTREAM_IPVS_SETS.includes(s)),
        [],
        "every set is one upstream's ipvs mode names",
      );
      const saved = await t.exec(t.node, ["iptables-nft-save"]);
      let table = "";
      for (const line of saved.split("\n")) {
        if (line.startsWith("*")) table = line.slice(1);
        const chain = /^:(KUBE-\S+)/.exec(line)?.[1];
        if (chain === undefined) continue;
        assert(
          UPSTREAM_IPVS_CHAINS[table as "nat" | "filter"]?.includes(chain),
          `${table} ${chain}: not upstream's`,
        );
      }
      for (const line of saved.split("\n").filter((l) => l.includes("kube-proxy-deno"))) {
        assert(
          line.startsWith("-A KUBE-IPVS-FILTER "),
          `a rule of ours outside upstream's rewritten chain: ${line}`,
        );
      }

      await upstreamStart(new NetnsExecutor(t.node), {
        mode: "nftables",
        clusterCIDR: "10.180.0.0/16",
        backend: "nft",
      }, [{
        namespace: "e2e",
        name: "web",
        portName: "p",
        clusterIP: "172.30.0.10",
        port: 80,
        targetPort: 8080,
        endpoints: [pod.ip],
      }]);
      await eventually(
        async () => assertEquals(await t.nodeAgent.tcp("172.30.0.10", 80), "pod-a"),
        CONVERGE_MS,
      );
      assertEquals(await t.exec(t.node, ["ipset", "list", "-n"]), "");
      assertEquals((await t.exec(t.node, ["ipvsadm", "-Sn"])).trim(), "");
      assertEquals(
        (await t.exec(t.node, ["ip", "-o", "link", "show", "kube-ipvs0"], { allowFail: true })).trim(),
        "",
      );
      assertEquals(
        (await t.exec(t.node, ["iptables-nft-save"])).split("\n").filter((l) =>
          /KUBE-|kube-proxy-deno/.test(l)
        ),
        [],
      );
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
