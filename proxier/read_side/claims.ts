/**
 * Address claims: Services that claim the same address and port (one's external IP another's
 * cluster IP, CVE-2020-8554's shape; two Services with one NodePort, possible in a file). The API
 * accepts the first (an admission policy is what refuses it), and so does the proxy, as upstream's:
 * it programs both and one wins. Every kernel mode here writes its service rules in the order of
 * the service ports' names, so at a full sync the port whose name sorts first wins the address
 * (the nftables mode keeps an earlier claimant between full syncs, and says so); the read side
 * names each claim, the winner and the losers, so `explain` of a loser never says a connection to
 * its address reaches its own endpoints.
 * @module
 */
import type { FamilyView } from "../family_view.ts";
import type { Via } from "./expectation.ts";

/** One claimant of an address and port. */
export interface Claimant {
  /** The service port's key. */
  readonly key: string;
  /** `namespace/name` of its Service. */
  readonly service: string;
  /** How it claims the address: its cluster IP, an external IP, a load-balancer IP, its NodePort. */
  readonly via: Via;
}

/** Several Services claiming one address and port of one protocol; `claimants[0]` wins. */
export interface AddressClaim {
  readonly protocol: string;
  /** The address, or `every NodePort address` for a NodePort. */
  readonly address: string;
  readonly port: number;
  /** Sorted by key: the first wins. */
  readonly claimants: readonly Claimant[];
}

/** Why the first claimant wins, as reports say it. */
export const CLAIM_ORDER =
  "its service port's name sorts first, the order every kernel mode writes its service rules in";

/** Returns every address and port of `view` that more than one Service claims, sorted. */
export function addressClaims(view: FamilyView): AddressClaim[] {
  const by = new Map<string, { protocol: string; address: string; port: number; claimants: Claimant[] }>();
  const claim = (protocol: string, address: string, port: number, c: Claimant) => {
    const id = `${protocol}|${address}|${port}`;
    let entry = by.get(id);
    if (entry === undefined) by.set(id, entry = { protocol, address, port, claimants: [] });
    entry.claimants.push(c);
  };
  for (const [key, svc] of view.services) {
    const at = (via: Via) => ({ key, service: svc.service, via });
    claim(svc.protocol, svc.clusterIP, svc.port, at("cluster IP"));
    for (const ip of svc.externalIPs) claim(svc.protocol, ip, svc.port, at("external IP"));
    for (const ip of svc.loadBalancerIPs) claim(svc.protocol, ip, svc.port, at("load balancer IP"));
    if (svc.nodePort !== 0) claim(svc.protocol, "every NodePort address", svc.nodePort, at("NodePort"));
  }
  const out: AddressClaim[] = [];
  for (const e of by.values()) {
    if (new Set(e.claimants.map((c) => c.service)).size < 2) continue;
    out.push({ ...e, claimants: e.claimants.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)) });
  }
  return out.sort((a, b) => `${a.address}|${a.port}` < `${b.address}|${b.port}` ? -1 : 1);
}

/** One line naming `c`: who wins the address, and who waits. */
export function claimText(c: AddressClaim): string {
  const [winner, ...losers] = c.claimants;
  const name = (x: Claimant) => `${x.service} (its ${x.via})`;
  return `${c.address}:${c.port}/${c.protocol} is claimed by ${c.claimants.length} Services: ` +
    `${name(winner)} wins (${CLAIM_ORDER}); ${losers.map(name).join(", ")} ` +
    `${losers.length === 1 ? "reaches" : "reach"} ${winner.service}'s endpoints there`;
}
