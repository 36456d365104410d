import { assert, assertEquals } from "../../tests/support/assert.ts";
import { NftRuleset } from "../../iptables/nft_ruleset.ts";
import { listingStatements } from "../../iptables/nft_listing.ts";
import { hashPrefix } from "../iptables/chain_name.ts";
import { nftListing } from "../../tests/support/kernel_listing.ts";
import { realKernel } from "../../tests/support/namespace.ts";
import { upstreamNftablesSync, type UpstreamPort } from "../../tests/support/upstream_kube_proxy.ts";
import { traceNft } from "./nft_walker.ts";

const NODE_IP = "192.168.0.2";
const nft = await realKernel(["nft"]);
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
    externalLocal: true,
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

/** `traceNft` over a listing, as the tracer reads a live node's or a saved one. */
function tracer(listing: string, nodeIP: string) {
  const ruleset = new NftRuleset();
  ruleset.apply(listingStatements(listing).join("\n"));
  return (src: string, dst: string, port: number, o: { proto?: "tcp" | "udp"; fromHost?: boolean } = {}) => {
    const pkt = { src, dst, port, protocol: o.proto ?? "tcp", ...(o.fromHost ? { fromHost: true } : {}) };
    const r = traceNft(ruleset, "IPv4", "kube-proxy", pkt, [nodeIP]);
    return [r.verdict, r.endpoints.join(","), r.masq, r.affinity];
  };
}

Deno.test({
  name:
    `nft tracer over upstream's nftables layout as the kernel lists it: anonymous numgen maps, endpoint chains, external/local/firewall chains, affinity sets${nft.note}`,
  ignore: nft.ignore,
  async fn() {
    const trace = tracer(await nftListing(upstreamNftablesSync(PORTS, "10.0.0.0/8")), NODE_IP);
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
  },
});

Deno.test("nft tracer over upstream 1.36's own listing of a node: each kind of Service and client", () => {
  const listing = Deno.readTextFileSync(
    new URL("../../tests/testdata/upstream-1.36/nftables-mode.nft", import.meta.url),
  );
  const trace = tracer(listing, "192.168.77.10");
  const node = "192.168.77.10", pod = "10.244.250.50", outside = "203.0.113.200";
  // The node's own connection to a cluster IP: outside the cluster CIDR, masqueraded.
  assertEquals(trace(node, "10.96.97.45", 80, { fromHost: true }), [
    "DNAT",
    "10.244.250.31:8080,10.244.9.31:8080",
    true,
    false,
  ]);
  assertEquals(trace(pod, "10.96.217.251", 53, { proto: "udp" }), [
    "DNAT",
    "10.244.250.32:5353,10.244.9.33:5353",
    false,
    false,
  ]);
  // externalTrafficPolicy Local on the NodePort: the local endpoint, the client's address kept.
  assertEquals(trace(outside, node, 30280), ["DNAT", "10.244.250.33:8080", false, false]);
  assertEquals(trace(outside, node, 30281)[0], "DROP", "Local policy, no local endpoint");
  assertEquals(trace("192.0.2.5", "198.51.100.80", 443), [
    "DNAT",
    "10.244.250.36:8443,10.244.9.39:8443",
    true,
    false,
  ]);
  assertEquals(trace(outside, "198.51.100.80", 443)[0], "DROP", "outside loadBalancerSourceRanges");
  assertEquals(trace(pod, "10.96.32.21", 80)[0], "REJECT", "no endpoints");
  assertEquals(trace(pod, "10.96.30.162", 80)[3], true, "ClientIP affinity");
  assertEquals(trace(pod, "10.96.99.99", 80)[0], "DROP", "an unallocated cluster IP");
  // internalTrafficPolicy Local: only the local endpoint.
  assertEquals(trace(pod, "10.96.36.91", 80), ["DNAT", "10.244.250.34:8080", false, false]);
});

Deno.test({
  name:
    `nft tracer: a client with an entry in a live affinity set is pinned to its endpoint, with the time it has left${nft.note}`,
  ignore: nft.ignore,
  async fn() {
    const sticky = PORTS.find((p) => p.affinitySeconds !== undefined)!;
    const set =
      `affinity-${
        hashPrefix(`${sticky.namespace}/${sticky.name}/tcp/${sticky.portName}__10.180.0.5/80`).slice(0, 8)
      }-` +
      `${sticky.namespace}/${sticky.name}/tcp/${sticky.portName}__10.180.0.5/80`;
    const listing = await nftListing(upstreamNftablesSync(PORTS, "10.0.0.0/8"), async (exec) => {
      const r = await exec.run("nft", {
        args: ["add", "element", "ip", "kube-proxy", set, "{ 203.0.113.2 timeout 10m }"],
      });
      if (r.code !== 0) throw new Error(r.stderr);
    });
    const ruleset = new NftRuleset();
    ruleset.apply(listingStatements(listing).join("\n"));
    const ask = (src: string) =>
      traceNft(ruleset, "IPv4", "kube-proxy", { src, dst: "5.6.7.8", port: 80, protocol: "tcp" }, [NODE_IP]);
    const pinned = ask("203.0.113.2");
    assertEquals([pinned.verdict, pinned.endpoints, pinned.pinned?.endpoint], [
      "DNAT",
      ["10.180.0.5:80"],
      "10.180.0.5:80",
    ]);
    const left = pinned.pinned?.expiresSeconds ?? 0;
    assert(left > 500 && left <= 600, `the entry has ${left} s left of 600`);
    // Another client has no entry: a new connection, not pinned.
    assertEquals(ask("203.0.113.3").pinned, undefined);
  },
});
