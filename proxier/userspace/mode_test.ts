import { assert, assertEquals, assertMatch } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";
import { renderFileSource } from "../read_side/render.ts";
import { userspaceMode } from "./mode.ts";

const OBJECTS = `apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: 192.168.0.2 }, { type: InternalIP, address: "fd00:168::2" }] }
---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: dual }
spec:
  type: NodePort
  clusterIP: 172.30.2.1
  clusterIPs: [172.30.2.1, "fd00:30::2:1"]
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 9090, nodePort: 30221 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: dual-v4, labels: { kubernetes.io/service-name: dual } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 9090 }]
endpoints: [{ addresses: [10.180.1.2], conditions: { ready: true }, nodeName: node-a }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: dual-v6, labels: { kubernetes.io/service-name: dual } }
addressType: IPv6
ports: [{ name: p, protocol: TCP, port: 9090 }]
endpoints:
  - { addresses: ["fd00:180:1::2"], conditions: { ready: true }, nodeName: node-a }
  - { addresses: ["fd00:180:2::2"], conditions: { ready: true }, nodeName: node-a }
`;

Deno.test("userspace mode serves both families: render writes ip6tables portals for the IPv6 cluster IP, and its listeners send IPv6 clients to the IPv6 endpoints", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kpd-userspace-mode-" });
  try {
    await Deno.writeTextFile(`${dir}/objects.yaml`, OBJECTS);
    const config = { ...defaultConfig(), source: { kind: "file" as const, path: dir } };
    const r = await renderFileSource({ mode: userspaceMode, config, log: new MemoryLogger() });
    assert("renderer" in r, JSON.stringify(r));
    assertMatch(r.output, /^# iptables-restore --noflush input\n\*nat\n/);
    assertMatch(
      r.output,
      /\n# ip6tables-restore --noflush input\n\*nat\n(.*\n)*-A KUBE-PORTALS-CONTAINER -d fd00:30::2:1\/128 -p tcp -m comment --comment "e2e\/dual:p" -m tcp --dport 80 -j REDIRECT --to-ports \d+\n/,
    );
    // The jumps into the portal chains, which a sync makes where missing, for trace to walk.
    assertMatch(
      r.output,
      /\n# ip6tables -t nat -I: .*\n\*nat\n-I PREROUTING -m comment --comment "handle ClusterIP services" -j KUBE-PORTALS-CONTAINER\n/,
    );
    const answer = (family: "IPv4" | "IPv6", dst: string, port: number) =>
      r.renderer.explain.answer!({
        src: family === "IPv4" ? "10.180.3.9" : "fd00:180:3::9",
        dst,
        port,
        protocol: "tcp",
      }, family);
    const v6 = ["[fd00:180:1::2]:9090", "[fd00:180:2::2]:9090"];
    assertEquals(answer("IPv6", "fd00:30::2:1", 80)?.endpoints, v6);
    assertEquals(
      answer("IPv6", "fd00:168::2", 30221)?.endpoints,
      v6,
      "the NodePort on the node's IPv6 address",
    );
    assertEquals(answer("IPv4", "172.30.2.1", 80)?.endpoints, ["10.180.1.2:9090"]);
    assertEquals(answer("IPv4", "192.168.0.2", 30221)?.endpoints, ["10.180.1.2:9090"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
