/**
 * The upstream stand-in (`tests/support/upstream_kube_proxy.ts`) writes what upstream kube-proxy
 * 1.36 writes: for the Services of `tests/testdata/upstream-1.36/objects.yaml`, its nftables
 * transaction, loaded into a network namespace and listed back by nft, is upstream's own listing of
 * that node, object by object (every chain, set and map, comments included); its iptables rules
 * for a ClusterIP Service, listed back by iptables-save, are upstream's lines for it.
 */
import { loadAll } from "js-yaml";
import { assertEquals } from "../support/assert.ts";
import { realKernel } from "../support/namespace.ts";
import { iptablesListing, nftBlocks, nftListing } from "../support/kernel_listing.ts";
import {
  upstreamIptablesSave,
  upstreamNftablesSync,
  type UpstreamPort,
  upstreamPortsOf,
} from "../support/upstream_kube_proxy.ts";

const DATA = new URL("../testdata/upstream-1.36/", import.meta.url);
const read = (f: string) => Deno.readTextFileSync(new URL(f, DATA));
/** The Services of the node: the file's, and the cluster's `kubernetes` Service (no endpoints there). */
const PORTS: UpstreamPort[] = [
  ...upstreamPortsOf(loadAll(read("objects.yaml")), "fxnode"),
  {
    namespace: "default",
    name: "kubernetes",
    portName: "https",
    clusterIP: "10.96.0.1",
    port: 443,
    targetPort: 6443,
    endpoints: [],
  },
];

const nft = await realKernel(["nft"]);
const ipt = await realKernel(["iptables-nft-restore", "iptables-nft-save"]);

Deno.test({
  name: `upstream stand-in: its nftables sync, listed back by nft, is upstream 1.36's own listing${nft.note}`,
  ignore: nft.ignore,
  async fn() {
    const script = upstreamNftablesSync(PORTS, "10.244.0.0/16", [], {
      nodeIP: "192.168.77.10",
      serviceCIDR: "10.96.0.0/16",
    });
    const ours = nftBlocks(await nftListing(script));
    const upstream = nftBlocks(read("nftables-mode.nft"));
    assertEquals([...ours.keys()].sort(), [...upstream.keys()].sort(), "the same objects");
    for (const [name, text] of upstream) assertEquals(ours.get(name), text, name);
  },
});

Deno.test({
  name:
    `upstream stand-in: its iptables rules for a ClusterIP Service, listed back, are upstream 1.36's lines${ipt.note}`,
  ignore: ipt.ignore,
  async fn() {
    const api = PORTS.filter((p) => p.name === "api");
    const up = { mode: "iptables", clusterCIDR: "10.244.0.0/16", backend: "nft" } as const;
    const lines = (save: string) =>
      save.split("\n").filter((l) => l.startsWith("-A") && l.includes("fx/api")).sort();
    assertEquals(
      lines(await iptablesListing(upstreamIptablesSave(up, api))),
      lines(read("iptables-mode.iptables-save")),
    );
  },
});
