/**
 * `--cleanup` (and another mode's start) for the ipvs mode: its virtual servers, iptables chains,
 * ipsets and kube-ipvs0, ours or upstream's, and nothing else.
 * @module
 */
import { IpLinkRunner, KUBE_IPVS_INTERFACE } from "../../iptables/ip_link.ts";
import { ExecError, type Executor } from "../../iptables/executor.ts";
import { destroySets, IpsetRunner } from "../../iptables/ipset.ts";
import { deleteVirtualServer, IpvsadmRunner } from "../../iptables/ipvsadm.ts";
import { type ChainOwnership, removeOwnChains } from "../_common/iptables_chains.ts";
import { ipFamily } from "../model/net.ts";
import { onEveryIptablesBackend } from "../_common/iptables_backend.ts";
import type { IPFamily } from "../model/types.ts";
import { removedText } from "../mode_definition.ts";
import { CHAINS, FORMER_SETS, JUMPS, SET, SET_NAMES, setName } from "./layout.ts";

/**
 * Removes what the ipvs mode (ours or upstream's) creates in `family`: virtual servers on
 * kube-ipvs0's addresses or on node ports in our sets at `interfaceIPs` (nothing else), the chains
 * and jumps on every iptables backend, then our sets, then kube-ipvs0 (with the IPv6 cleanup, the
 * last). With `keepDatapath` the virtual servers and kube-ipvs0 stay (they drain: `drain.ts`). Does
 * nothing where nothing of it exists; running it twice is fine.
 */
export async function cleanupIpvs(
  exec: Executor,
  family: IPFamily,
  everything = true,
  keepDatapath = false,
  interfaceIPs: readonly string[] = [],
): Promise<string[]> {
  const link = new IpLinkRunner({ exec });
  const bound = new Set((await link.addresses()).filter((ip) => ipFamily(ip) === family));
  const ipset = new IpsetRunner({ exec });
  const sets = await ipset.save().catch((e) => {
    if (e instanceof ExecError && e.code === -1) throw e; // not installed: nothing of ours
    return new Map();
  });
  const nodePorts = new Set<number>();
  for (const n of [SET.NODE_PORT_TCP, SET.NODE_PORT_UDP]) {
    for (const e of sets.get(setName(n, family))?.entries ?? []) nodePorts.add(Number(e));
  }
  const ipvs = new IpvsadmRunner({ exec });
  const table = await ipvs.read().catch(() => []); // no IPVS in the kernel: nothing to remove
  const ours = table.filter(({ vs }) =>
    ipFamily(vs.address) === family &&
    (bound.has(vs.address) || (interfaceIPs.includes(vs.address) && nodePorts.has(vs.port)))
  );
  const servers = ours.length > 0 && !keepDatapath ? ours.length : 0;
  if (servers > 0) await ipvs.apply(ours.map(({ vs }) => deleteVirtualServer(vs)));
  const chains = await onEveryIptablesBackend(
    exec,
    family,
    (ipt) => removeOwnChains(ipt, IPVS_CHAINS, everything),
  );
  const present = [...SET_NAMES, ...FORMER_SETS].map((n) => setName(n, family)).filter((n) => sets.has(n));
  // Right after the rules that match them went: the kernel may hold a set a moment longer.
  if (present.length > 0) await destroySets(ipset, present);
  // kube-ipvs0 holds both families' addresses: it goes with the last family's cleanup.
  let linkGone = false;
  if (family === "IPv6" && !keepDatapath) {
    const r = await exec.run("ip", { args: ["-o", "link", "show", "dev", KUBE_IPVS_INTERFACE] });
    if (r.code === 0) await link.remove(), linkGone = true;
  }
  return [
    ...removedText([
      [servers, "virtual server"],
      [chains.reduce((a, c) => a + c.removed, 0), "chain"],
      [present.length, "ipset"],
    ]),
    ...(linkGone ? [KUBE_IPVS_INTERFACE] : []),
  ];
}

/** Chains only the ipvs mode creates: where one exists, the ipvs mode ran. */
const IPVS_ONLY: ReadonlySet<string> = new Set([
  "KUBE-NODE-PORT",
  "KUBE-LOAD-BALANCER",
  "KUBE-SOURCE-RANGES-FIREWALL",
  "KUBE-IPVS-FILTER",
  "KUBE-IPVS-OUT-FILTER",
]);

/**
 * The ipvs mode's chains, for {@linkcode removeOwnChains}: KUBE-SERVICES, KUBE-MARK-MASQ... are the
 * iptables mode's names too.
 */
const IPVS_CHAINS: ChainOwnership = {
  jumps: JUMPS,
  mine: (table, c) => CHAINS[table as "nat" | "filter"]?.includes(c) ?? false,
  onlyMine: (_, c) => IPVS_ONLY.has(c),
  onlyMineNames: [...IPVS_ONLY],
};
