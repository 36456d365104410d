/**
 * The iptables mode in the flow table: the real proxier on the fake iptables, packets walked by
 * the tracer. Also the setup the iptables unit tests start from.
 * @module
 */
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { FakeConntrack } from "../../iptables/testing/fake_conntrack.ts";
import { tracePacket } from "../../proxier/trace/iptables_walker.ts";
import { IptablesProxier, type IptablesProxierOptions } from "../../proxier/iptables/proxier.ts";
import { baseOptions } from "../support/fixtures.ts";
import { type Datapath, feed, type FlowSetup, traceAgain, tracerPacket, withView } from "./datapath.ts";
import { EMPTY, NODE_A, REPRESENTATIVE } from "./objects.ts";

/**
 * A proxier on a fake iptables with `setup`'s objects and node loaded (not yet synced), its
 * options overridden by `over`.
 */
export function iptablesSetup(
  over: Partial<IptablesProxierOptions> = {},
  setup: Partial<FlowSetup> | "empty" = {},
) {
  const fake = new FakeIPTables();
  const conntrack = new FakeConntrack();
  const opts = baseOptions();
  const node = setup === "empty" ? NODE_A : setup.node ?? NODE_A;
  const o = setup === "empty" ? {} : setup.options ?? {};
  const proxier = new IptablesProxier({
    ...opts,
    iptables: fake,
    conntrack,
    masqueradeAll: o.masqueradeAll ?? false,
    masqueradeBit: 14,
    localDetection: { mode: "ClusterCIDR", clusterCIDRs: ["10.180.0.0/16"] },
    nodePortAddresses: o.nodePortAddresses ?? [],
    localhostNodePorts: o.localhostNodePorts ?? true,
    allowExternalIPs: o.allowExternalIPs,
    nodeIPs: node.ips,
    ...over,
  });
  feed(proxier, { node, objects: setup === "empty" ? EMPTY : setup.objects ?? REPRESENTATIVE, options: o });
  return { fake, conntrack, proxier, log: opts.log, metrics: opts.metrics };
}

/** The iptables adapter. */
export const iptablesDatapath: Datapath = {
  mode: "iptables",
  reportsMasquerade: true,
  async load(setup) {
    const { fake, proxier } = iptablesSetup({}, setup);
    await proxier.syncNow();
    return withView(proxier, (p) => {
      const r = traceAgain(p, (to) => tracePacket(fake, tracerPacket(p, to), setup.node.ips));
      if (r.masqMixed) throw new Error(`some paths masquerade and some do not: ${JSON.stringify(r)}`);
      if (r.verdict === "REDIRECT") throw new Error(`iptables mode never redirects: ${JSON.stringify(r)}`);
      if (r.verdict === "UNKNOWN") {
        throw new Error(`the tracer does not understand: ${r.unsupported.join("; ")}`);
      }
      return { endpoints: r.endpoints, masquerade: r.masq, verdict: r.verdict };
    });
  },
};
