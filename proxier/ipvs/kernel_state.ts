/**
 * What the ipvs mode owns in the kernel, read at every full sync: the virtual servers that are ours
 * (bound on kube-ipvs0 or listed in our KUBE-IPVS-IPS set, or a node port of ours on a node address;
 * nothing else is ever touched),
 * our ipsets' entries and kube-ipvs0's addresses, of one family.
 * @module
 */
import type { DummyLink } from "../../iptables/ip_link.ts";
import type { IPSet } from "../../iptables/ipset.ts";
import { type IPVS, type RealServer, rsKey, type VirtualServer, vsKey } from "../../iptables/ipvsadm.ts";
import { cidrContains, ipFamily } from "../model/net.ts";
import type { IPFamily } from "../model/types.ts";
import { FORMER_SETS, SET, SET_NAMES, type SetName, setName } from "./layout.ts";

/** The ipvs mode's kernel objects of one family. */
export interface KernelState {
  /** Our virtual servers by `vsKey`, with their real servers by `rsKey`. */
  readonly servers: Map<string, { vs: VirtualServer; reals: Map<string, RealServer> }>;
  readonly entries: Map<SetName, Set<string>>;
  /** kube-ipvs0's addresses. */
  readonly binds: Set<string>;
  /** {@linkcode FORMER_SETS} found, by kernel name. */
  readonly former: readonly string[];
}

/** Reads {@linkcode KernelState}; `excludeCIDRs` (`--ipvs-exclude-cidrs`) are never ours. */
export async function readKernelState(
  o: {
    readonly ipvs: IPVS;
    readonly ipset: IPSet;
    readonly link: DummyLink;
    readonly excludeCIDRs: readonly string[];
    readonly nodeIPs: readonly string[];
  },
  family: IPFamily,
): Promise<KernelState> {
  const [table, sets, bound] = await Promise.all([o.ipvs.read(), o.ipset.save(), o.link.addresses()]);
  const binds = new Set(bound.filter((ip) => ipFamily(ip) === family));
  const entries = new Map<SetName, Set<string>>();
  for (const n of SET_NAMES) {
    const content = sets.get(setName(n, family));
    if (content !== undefined) entries.set(n, new Set(content.entries));
  }
  const nodePorts = new Set<number>();
  for (const n of [SET.NODE_PORT_TCP, SET.NODE_PORT_UDP]) {
    for (const e of entries.get(n) ?? []) nodePorts.add(Number(e));
  }
  for (const e of entries.get(SET.NODE_PORT_SCTP) ?? []) nodePorts.add(Number(e.split(":").at(-1)));
  const servers: KernelState["servers"] = new Map();
  for (const { vs, reals } of table) {
    if (ipFamily(vs.address) !== family) continue;
    if (o.excludeCIDRs.some((c) => cidrContains(c, vs.address))) continue;
    // The set counts too: an address someone removed from kube-ipvs0 leaves its virtual server ours,
    // so the repair re-binds it instead of failing on "Service already exists" for ever.
    const ours = binds.has(vs.address) || (entries.get(SET.IPVS_IPS)?.has(vs.address) ?? false) ||
      (o.nodeIPs.includes(vs.address) && nodePorts.has(vs.port));
    if (!ours) continue;
    servers.set(vsKey(vs), { vs, reals: new Map(reals.map((r) => [rsKey(r), r])) });
  }
  const former = FORMER_SETS.map((n) => setName(n, family)).filter((n) => sets.has(n));
  return { servers, entries, binds, former };
}
