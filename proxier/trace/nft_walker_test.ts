import { assertEquals } from "../../tests/support/assert.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { upstreamNftablesSync, type UpstreamPort } from "../../tests/support/upstream_kube_proxy.ts";
import { traceNft } from "./nft_walker.ts";

const NODE_IP = "192.168.0.2";
const base = { portName: "p80", port: 80, targetPort: 80 };
/** Upstream nftables mode's layout for four Services (the shapes of its proxier tests' dumps). */
const PORTS: UpstreamPort[] = [
  {
    ...base,
    namespace: "ns1",
    name: "svc1",
    clusterIP: "172.30.0.41",
    endpoints: ["10.180.0.1", "10.180.0.2"],
  },
  {
    ...base,
    namespace: "ns2",
    name: "svc2",
    clusterIP: "172.30.0.42",
    endpoints: ["10.180.0.3", "10.180.0.4"],
    nodePort: 3001,
    externalIPs: ["192.168.99.22"],
    loadBalancerIPs: ["1.2.3.4"],
    localEndpoints: ["10.180.0.3"],
  },
  {
    ...base,
    namespace: "ns5",
    name: "svc5",
    clusterIP: "172.30.0.45",
    endpoints: ["10.180.0.5"],
    nodePort: 3002,
    loadBalancerIPs: ["5.6.7.8"],
    sourceRanges: ["203.0.113.0/25"],
    affinitySeconds: 10800,
  },
  { ...base, namespace: "ns6", name: "svc6", clusterIP: "172.30.0.46", endpoints: [] },
];

Deno.test("nft tracer over upstream's nftables layout: numgen verdict maps, endpoint chains, external/local/firewall chains, affinity sets", async () => {
  const fake = new FakeNft();
  await fake.apply(upstreamNftablesSync(PORTS, "10.0.0.0/8"));
  const trace = (src: string, dst: string, port: number) => {
    const r = traceNft(fake, "IPv4", "kube-proxy", { src, dst, port, protocol: "tcp" }, [NODE_IP]);
    return [r.verdict, r.endpoints.join(","), r.masq, r.affinity];
  };
  const pod = "10.0.0.9", outside = "203.0.113.2", blocked = "203.0.113.200";
  assertEquals(trace(pod, "172.30.0.41", 80), ["DNAT", "10.180.0.1:80,10.180.0.2:80", false, false]);
  assertEquals(trace(outside, "172.30.0.41", 80), ["DNAT", "10.180.0.1:80,10.180.0.2:80", true, false]);
  // externalTrafficPolicy Local: outside clients reach the local endpoint unmasqueraded; pods short-circuit.
  assertEquals(trace(outside, NODE_IP, 3001), ["DNAT", "10.180.0.3:80", false, false]);
  assertEquals(trace(outside, "192.168.99.22", 80), ["DNAT", "10.180.0.3:80", false, false]);
  assertEquals(trace(pod, "1.2.3.4", 80), ["DNAT", "10.180.0.3:80,10.180.0.4:80", false, false]);
  // Source ranges: inside is admitted (and masqueraded, Cluster policy), outside dropped.
  assertEquals(trace(outside, "5.6.7.8", 80), ["DNAT", "10.180.0.5:80", true, true]);
  assertEquals(trace(blocked, "5.6.7.8", 80)[0], "DROP");
  assertEquals(trace(pod, "172.30.0.46", 80)[0], "REJECT");
  assertEquals(trace(pod, "172.30.0.41", 81)[0], "REJECT", "a port the cluster IP does not serve");
});
