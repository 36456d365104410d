/**
 * The nftables layout's ClientIP affinity: per distinct timeout T, a dynamic map `affinity-T` of
 * pins (client . entry -> endpoint) with its DNAT chain and the chain that records new pins.
 * @module
 */
import type { IPFamily } from "../types.ts";
import { affinityName, affinityRecordChain, TABLE, words } from "./layout.ts";

/**
 * Returns the statements that create the affinity map for timeout `t` (kept if it exists: it holds
 * the clients' pins) and its two chains (flushed and rewritten). The map is declared with explicit
 * types, so its rules can be rewritten while it exists.
 */
export function affinityStatements(family: IPFamily, t: number): string[] {
  const { fam, addr } = words(family);
  const tbl = `${fam} ${TABLE}`;
  const name = affinityName(t);
  const rec = affinityRecordChain(t);
  const out = [
    `add map ${tbl} ${name} { type ${addr} . ${addr} . inet_proto . inet_service : ${addr} . inet_service; flags dynamic,timeout; timeout ${t}s; }`,
    `add chain ${tbl} ${name}`,
    `flush chain ${tbl} ${name}`,
    `add rule ${tbl} ${name} meta l4proto { tcp, udp, sctp } th dport != 0 dnat ${fam} to ${fam} saddr . ${fam} daddr . meta l4proto . th dport map @${name}`,
    `add chain ${tbl} ${rec}`,
    `flush chain ${tbl} ${rec}`,
  ];
  // `P dport != 0` is the protocol dependency `ct original proto-dst` needs; after DNAT the port is
  // the endpoint's, never 0. (`meta l4proto P` would do, but nft prints it in a form it cannot
  // read back.)
  for (const p of ["tcp", "udp", "sctp"]) {
    out.push(
      `add rule ${tbl} ${rec} ${p} dport != 0 update @${name} { ${fam} saddr . ct original ${fam} daddr . meta l4proto . ct original proto-dst : ${fam} daddr . ${p} dport }`,
    );
  }
  return out;
}
