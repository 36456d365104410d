/**
 * The nftables mode in the flow table: the real proxier on the fake nft, packets walked by the
 * nftables tracer; with KubeProxyNFTablesLocalhostNodePorts, the node's packets to its loopback
 * address go to the proxier's socket proxy (on fake listeners, nothing bound) instead.
 * @module
 */
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { FakeConntrack } from "../../iptables/testing/fake_conntrack.ts";
import { traceNft } from "../../proxier/trace/nft_walker.ts";
import { TABLE } from "../../proxier/nftables/layout.ts";
import { NftablesProxier, type NftablesProxierOptions } from "../../proxier/nftables/proxier.ts";
import { baseOptions } from "../support/fixtures.ts";
import {
  type Datapath,
  feed,
  type FlowPacket,
  type FlowResult,
  type FlowSetup,
  tracerPacket,
  withView,
} from "./datapath.ts";
import { unboundListen } from "../../proxier/socket_proxy/listen.ts";
import { NodePortAddresses } from "../../proxier/model/nodeport_addresses.ts";
import { isLoopback } from "../../proxier/model/net.ts";
import type { LocalhostNodePorts } from "../../proxier/socket_proxy/localhost_node_ports.ts";
import { EMPTY, NODE_A, REPRESENTATIVE } from "./objects.ts";
import { nftablesSchedulers } from "../../proxier/nftables/schedulers.ts";
import { DEFAULT_MAGLEV_TABLE_SIZE } from "../../loadbalancer/maglev.ts";

/**
 * A proxier on a fake nft with `setup`'s objects and node loaded (not yet synced), its options
 * overridden by `over`.
 */
export function nftablesSetup(over: Partial<NftablesProxierOptions> = {}, setup: Partial<FlowSetup> = {}) {
  const fake = new FakeNft();
  const conntrack = new FakeConntrack();
  const opts = baseOptions();
  const node = setup.node ?? NODE_A;
  const o = setup.options ?? {};
  const family = over.family ?? "IPv4";
  const proxier = new NftablesProxier({
    ...opts,
    fullSyncPeriodMs: 3_600_000,
    nft: fake.forFamily(family),
    conntrack,
    masqueradeAll: o.masqueradeAll ?? false,
    masqueradeBit: 14,
    nodePortAddresses: o.nodePortAddresses ?? [],
    allowExternalIPs: o.allowExternalIPs,
    // As the mode decides (nftables/mode.ts): the gate on and loopback asked for.
    localhostNodePorts: o.localhostNodePortProxy === true &&
        new NodePortAddresses(family, o.nodePortAddresses ?? [], undefined).explicitLoopback
      ? { udpIdleTimeoutMs: 1000, listen: unboundListen }
      : undefined,
    nodeIPs: node.ips,
    localDetection: { mode: "ClusterCIDR", clusterCIDRs: ["10.180.0.0/16"] },
    affinitySupported: true,
    schedulers: nftablesSchedulers(over.maglevTableSize ?? DEFAULT_MAGLEV_TABLE_SIZE),
    ...over,
  });
  feed(proxier, { node, objects: setup.objects ?? REPRESENTATIVE, options: o });
  return { fake, conntrack, proxier, log: opts.log, metrics: opts.metrics, clock: opts.clock };
}

/** An empty proxier on a fake nft (objects are added by the test). */
export function emptyNftablesSetup(over: Partial<NftablesProxierOptions> = {}) {
  return nftablesSetup(over, { objects: EMPTY });
}

/** The nftables adapter. */
export const nftablesDatapath: Datapath = {
  mode: "nftables",
  reportsMasquerade: true,
  async load(setup) {
    const { fake, proxier } = nftablesSetup({}, setup);
    await proxier.syncNow();
    return withView(proxier, (p) => {
      if (proxier.localhost !== undefined && p.fromNode === true && isLoopback(p.dst)) {
        return viaSocketProxy(proxier.localhost, p);
      }
      // A first connection records its endpoint in the affinity map, as the kernel does: its row
      // has a load of its own (flows_test.ts), so the record stays with it.
      if (p.again === true) traceNft(fake, "IPv4", TABLE, tracerPacket(p), setup.node.ips, { record: true });
      const r = traceNft(fake, "IPv4", TABLE, tracerPacket(p), setup.node.ips);
      if (r.masqMixed) throw new Error(`some paths masquerade and some do not: ${JSON.stringify(r)}`);
      return { endpoints: r.endpoints, masquerade: r.masq, verdict: r.verdict };
    });
  },
};

/**
 * Where the socket proxy sends a connection to a loopback NodePort: the endpoints it balances over
 * (the endpoint sees the node's address), or refused when nothing listens there.
 */
function viaSocketProxy(lo: LocalhostNodePorts, p: FlowPacket): FlowResult {
  const route = lo.route(p.proto.toUpperCase() as "TCP" | "UDP" | "SCTP", p.port);
  if (route === undefined) return { endpoints: [], masquerade: false, verdict: "REJECT" };
  if (p.again !== true) return { endpoints: [...route.endpoints].sort(), masquerade: true, verdict: "DNAT" };
  // Real picks: one first connection, then every endpoint the next connections get.
  lo.pick(route.service, p.src);
  const next = new Set(route.endpoints.map(() => lo.pick(route.service, p.src)!));
  return { endpoints: [...next].sort(), masquerade: true, verdict: "DNAT" };
}
