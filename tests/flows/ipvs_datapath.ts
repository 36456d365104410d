/**
 * The ipvs mode on its fakes (FakeIpvs, FakeIpset, FakeIPTables, FakeDummyLink): the setup its
 * unit tests start from.
 * @module
 */
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { RecordingConntrack } from "../../iptables/testing/fake_conntrack.ts";
import { FakeDummyLink } from "../../iptables/testing/fake_dummy_link.ts";
import { FakeIpset } from "../../iptables/testing/fake_ipset.ts";
import { FakeIpvs } from "../../iptables/testing/fake_ipvs.ts";
import { IpvsProxier, type IpvsProxierOptions } from "../../proxier/ipvs/proxier.ts";
import { ProxyMetrics } from "../../proxier/metrics.ts";
import { baseOptions } from "../fixtures.ts";
import { NODE_IP } from "./objects.ts";

/** A proxier on the four fakes (nothing synced yet), its options overridden by `over`. */
export function ipvsSetup(over: Partial<IpvsProxierOptions> = {}) {
  const ipvs = new FakeIpvs();
  const ipset = new FakeIpset();
  const iptables = new FakeIPTables();
  const link = new FakeDummyLink();
  const conntrack = new RecordingConntrack();
  const opts = baseOptions({ metrics: new ProxyMetrics("ipvs") });
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
