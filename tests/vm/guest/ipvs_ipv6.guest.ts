/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): the ipvs mode's IPv6 half through a
 * real IPVS kernel: the program (as `deno task start` starts it) in a node namespace, one pod
 * namespace on a veth pair, an IPv6-only Service.
 */
import { assertEquals, assertMatch } from "../../support/assert.ts";
import { Agent } from "../../e2e/netns.ts";
import { sh } from "../../support/namespace.ts";
import { startArgs } from "../../support/program.ts";
import { eventually } from "../../support/net_helpers.ts";
import { CONVERGE_MS, IN_VM } from "../../support/bounds.ts";

Deno.test({
  name: "ipvs IPv6: a cluster IP and a NodePort reach the pod over IPv6",
  ignore: !IN_VM,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const id = crypto.randomUUID().slice(0, 6);
    const node = `kpd-${id}-node6`;
    const pod = `kpd-${id}-pod6`;
    const dir = await Deno.makeTempDir();
    const agents: Agent[] = [];
    let proxy: Deno.ChildProcess | undefined;
    const inNs = (ns: string, args: string[]) => sh("ip", ["netns", "exec", ns, ...args]);
    try {
      for (const ns of [node, pod]) {
        await sh("ip", ["netns", "add", ns]);
        await inNs(ns, ["ip", "link", "set", "lo", "up"]);
      }
      await sh("ip", [
        "link",
        "add",
        "v6host",
        "netns",
        node,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        pod,
      ]);
      await inNs(node, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
      await inNs(node, ["ip", "addr", "add", "fd00:1::1/64", "dev", "v6host", "nodad"]);
      await inNs(node, ["ip", "link", "set", "v6host", "up"]);
      await inNs(pod, ["ip", "addr", "add", "fd00:1::2/64", "dev", "eth0", "nodad"]);
      await inNs(pod, ["ip", "link", "set", "eth0", "up"]);
      await inNs(pod, ["ip", "-6", "route", "add", "default", "via", "fd00:1::1"]);
      const podAgent = new Agent(pod);
      const nodeAgent = new Agent(node);
      agents.push(podAgent, nodeAgent);
      assertEquals(
        (await podAgent.request({ op: "serve", name: "pod6", port: 8080, hostname: "::" })).ok,
        true,
      );
      await Deno.writeTextFile(
        `${dir}/v6.yaml`,
        `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web6 }
spec:
  type: NodePort
  ipFamilies: [IPv6]
  clusterIP: fd00:30::10
  clusterIPs: [fd00:30::10]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30086 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: web6-1, labels: { kubernetes.io/service-name: web6 } }
addressType: IPv6
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: ["fd00:1::2"], conditions: { ready: true }, nodeName: node-a }
`,
      );
      proxy = new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          node,
          Deno.execPath(),
          ...startArgs([
            "--proxy-mode=ipvs",
            `--source=file:${dir}`,
            "--hostname-override=node-a",
            "--cluster-cidr=fd00:1::/64",
            "--healthz-bind-address=",
            "--metrics-bind-address=",
          ]),
        ],
        stdout: "null",
        stderr: "inherit",
      }).spawn();
      await eventually(async () => assertEquals(await nodeAgent.tcp("fd00:30::10", 80), "pod6"), CONVERGE_MS);
      assertEquals(await podAgent.tcp("fd00:30::10", 80), "pod6", "from the pod (hairpin)");
      assertEquals(await podAgent.tcp("fd00:1::1", 30086), "pod6", "the NodePort on the node's IPv6 address");
      assertMatch(await inNs(node, ["ipset", "list", "-n"]), /KUBE-6-CLUSTER-IP/);
      assertMatch(await inNs(node, ["ipvsadm", "-S", "-n"]), /-A -t \[fd00:30::10\]:80 -s rr/);
    } finally {
      proxy?.kill("SIGKILL");
      await proxy?.status;
      for (const a of agents) await a.close();
      for (const ns of [pod, node]) await sh("ip", ["netns", "del", ns], { allowFail: true });
      await Deno.remove(dir, { recursive: true });
    }
  },
});
