import { assertEquals } from "../../tests/support/assert.ts";
import { iptablesLocalMatch, localDetector, nftLocalMatch } from "./local_detector.ts";

Deno.test("local detector: each --detect-local-mode's match in iptables and nft, per family", () => {
  const node = { spec: { podCIDRs: ["10.244.3.0/24", "fd00:10:244:3::/64"] } };
  const cases = [
    [
      { mode: "ClusterCIDR", clusterCIDRs: ["10.244.0.0/16"] },
      "IPv4",
      "-s 10.244.0.0/16",
      "ip saddr 10.244.0.0/16",
    ],
    [{ mode: "NodeCIDR", clusterCIDRs: [] }, "IPv6", "-s fd00:10:244:3::/64", "ip6 saddr fd00:10:244:3::/64"],
    [
      { mode: "BridgeInterface", clusterCIDRs: [], bridgeInterface: "cbr0" },
      "IPv4",
      "-i cbr0",
      'iifname "cbr0"',
    ],
    [
      { mode: "InterfaceNamePrefix", clusterCIDRs: [], interfaceNamePrefix: "veth" },
      "IPv6",
      "-i veth+",
      'iifname "veth*"',
    ],
  ] as const;
  for (const [d, family, ipt, nft] of cases) {
    const det = localDetector(d, family, node)!;
    assertEquals(iptablesLocalMatch(det, true), ipt, d.mode);
    assertEquals(iptablesLocalMatch(det, false), `! ${ipt}`, d.mode);
    assertEquals(nftLocalMatch(det, family, true), nft, d.mode);
    assertEquals(nftLocalMatch(det, family, false), nft.replace(/ (?=[^ ]+$)/, " != "), d.mode);
  }
  // No CIDR of this family (or no Node yet): traffic cannot be told apart.
  assertEquals(localDetector({ mode: "ClusterCIDR", clusterCIDRs: ["10.0.0.0/8"] }, "IPv6", node), undefined);
  assertEquals(localDetector({ mode: "NodeCIDR", clusterCIDRs: [] }, "IPv4", undefined), undefined);
});
