/**
 * Leaving the ipvs mode without cutting connections. An established IPVS connection has no
 * netfilter NAT of its own: its packets reach the service address (local on kube-ipvs0), and IPVS's
 * connection entry forwards them, which needs the virtual server. The mode that takes over DNATs
 * new connections in prerouting and output, before routing, so they never reach IPVS; established
 * ones are untouched by its NAT rules (conntrack runs NAT for a connection's first packet only).
 * So the virtual servers and kube-ipvs0's addresses stay while connections use them; the ipvs
 * mode's iptables rules and ipsets (which only decide new connections) go at once.
 * @module
 */
import { IpLinkRunner, KUBE_IPVS_INTERFACE } from "../../iptables/ip_link.ts";
import type { Executor } from "../../iptables/executor.ts";
import { IpsetRunner } from "../../iptables/ipset.ts";
import { deleteVirtualServer, IpvsadmRunner, type VirtualServer, vsKey } from "../../iptables/ipvsadm.ts";
import { ipFamily } from "../model/net.ts";
import { SET, setName } from "./layout.ts";

/** The ipvs datapath kept for connections in flight, and how it ends. */
export interface IpvsDrain {
  /** The virtual servers kept (both families). */
  readonly servers: readonly VirtualServer[];
  /** Connections IPVS still carries through them: TCP established, UDP entries alive. */
  connections(): Promise<number>;
  /** Deletes the virtual servers and kube-ipvs0. */
  finish(): Promise<void>;
}

/**
 * Returns the ipvs mode's datapath on this node (the virtual servers on kube-ipvs0's addresses, or
 * on node addresses at a NodePort of its sets), to keep while it drains; undefined when there is
 * none (no kube-ipvs0, no IPVS in the kernel). Read before the mode's sets are destroyed.
 */
export async function ipvsDrain(exec: Executor, nodeIPs: readonly string[]): Promise<IpvsDrain | undefined> {
  const link = new IpLinkRunner({ exec });
  const ipvs = new IpvsadmRunner({ exec });
  const present = await exec.run("ip", { args: ["-o", "link", "show", "dev", KUBE_IPVS_INTERFACE] })
    .catch(() => undefined);
  if (present?.code !== 0) return undefined;
  const bound = new Set(await link.addresses());
  const sets = await new IpsetRunner({ exec }).save().catch(() => new Map());
  const nodePorts = new Set<number>();
  for (const family of ["IPv4", "IPv6"] as const) {
    for (const n of [SET.NODE_PORT_TCP, SET.NODE_PORT_UDP]) {
      for (const e of sets.get(setName(n, family))?.entries ?? []) nodePorts.add(Number(e));
    }
  }
  const table = await ipvs.read().catch(() => []);
  const servers = table.map((s) => s.vs).filter((vs) =>
    ipFamily(vs.address) !== undefined &&
    (bound.has(vs.address) || (nodeIPs.includes(vs.address) && nodePorts.has(vs.port)))
  );
  const ours = new Set(servers.map(vsKey));
  return {
    servers,
    async connections() {
      let n = 0;
      for (const [key, c] of await ipvs.connections()) {
        const vs = key.slice(0, key.indexOf("|"));
        if (!ours.has(vs)) continue;
        // A UDP entry counts as inactive while it lives; TCP's inactive ones are closing.
        n += c.active + (vs.startsWith("UDP/") ? c.inactive : 0);
      }
      return n;
    },
    async finish() {
      if (servers.length > 0) await ipvs.apply(servers.map(deleteVirtualServer)).catch(() => {});
      await link.remove().catch(() => {});
    },
  };
}
