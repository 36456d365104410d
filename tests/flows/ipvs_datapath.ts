/**
 * The ipvs mode in the flow table: the real proxier on its fakes (FakeIpvsadm, FakeIpset, FakeIPTables,
 * FakeIpLink), packets walked by the ipvs tracer. Also the setup its unit tests start from.
 * @module
 */
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { FakeConntrack } from "../../iptables/testing/fake_conntrack.ts";
import { FakeIpLink } from "../../iptables/testing/fake_ip_link.ts";
import { FakeIpset } from "../../iptables/testing/fake_ipset.ts";
import { FakeIpvsadm } from "../../iptables/testing/fake_ipvsadm.ts";
import { IpvsProxier, type IpvsProxierOptions } from "../../proxier/ipvs/proxier.ts";
import { baseOptions } from "../support/fixtures.ts";
import { NODE_IP } from "./objects.ts";
import { parseSave } from "../../iptables/ipvsadm.ts";
import { traceIpvs } from "../../proxier/ipvs/trace.ts";
import { type Datapath, feed, traceAgain, tracerPacket, withView } from "./datapath.ts";

/** A proxier on the four fakes (nothing synced yet), its options overridden by `over`. */
export function ipvsSetup(over: Partial<IpvsProxierOptions> = {}) {
  const ipvs = new FakeIpvsadm();
  const ipset = new FakeIpset();
  const iptables = new FakeIPTables();
  const link = new FakeIpLink();
  const conntrack = new FakeConntrack();
  const opts = baseOptions();
  const proxier = new IpvsProxier({
    ...opts,
    ipvs,
    ipset,
    iptables,
    link,
    conntrack,
    scheduler: "rr",
    excludeCIDRs: [],
    masqueradeAll: false,
    masqueradeBit: 14,
    localDetection: { mode: "ClusterCIDR", clusterCIDRs: ["10.180.0.0/16"] },
    nodePortAddresses: [],
    nodeIPs: [NODE_IP],
    ...over,
  });
  return {
    ipvs,
    ipset,
    iptables,
    link,
    conntrack,
    proxier,
    clock: opts.clock,
    log: opts.log,
    metrics: opts.metrics,
  };
}

/** The ipvs adapter. */
export const ipvsDatapath: Datapath = {
  mode: "ipvs",
  reportsMasquerade: true,
  async load(setup) {
    const o = setup.options;
    const s = ipvsSetup({
      masqueradeAll: o.masqueradeAll ?? false,
      nodePortAddresses: o.nodePortAddresses ?? [],
      nodeIPs: setup.node.ips,
      allowExternalIPs: o.allowExternalIPs,
    });
    feed(s.proxier, setup);
    await s.proxier.syncNow();
    const state = {
      rules: s.iptables,
      sets: s.ipset.lookup(),
      services: parseSave(s.ipvs.save()),
      bound: new Set(s.link.bound),
    };
    return withView(s.proxier, (p) => {
      const r = traceAgain(p, (to) =>
        traceIpvs(state, {
          ...tracerPacket(p, to),
          fromPod: p.fromNode !== true && p.src.startsWith("10.180."),
        }, setup.node.ips));
      if (r.masqMixed) throw new Error(`some paths masquerade and some do not: ${JSON.stringify(r)}`);
      if (r.verdict === "UNKNOWN") {
        throw new Error(`the tracer does not understand: ${r.unsupported.join("; ")}`);
      }
      if (r.verdict === "REDIRECT") throw new Error(`ipvs mode never redirects: ${JSON.stringify(r)}`);
      return { endpoints: r.endpoints, masquerade: r.masq, verdict: r.verdict };
    });
  },
};
