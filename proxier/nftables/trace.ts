/**
 * The nftables mode's tracer: reads this node's `kube-proxy` table (or a file) and traces through
 * it with the nftables interpreter (`proxier/trace/nft_walker.ts`).
 * @module
 */
import { addressFamily } from "../../iptables/ip.ts";
import { NftRuleset } from "../../iptables/nft_ruleset.ts";
import { listingStatements } from "../../iptables/nft_listing.ts";
import { traceNft } from "../trace/nft_walker.ts";
import { lastParsed } from "../trace/parse_memo.ts";
import {
  queryPacket,
  queryRules,
  type TraceDeps,
  type TraceQuery,
  type TraceResult,
} from "../trace/packet.ts";
import { TABLE } from "./layout.ts";

/**
 * `trace --proxy-mode=nftables`: traces `q` through this node's live `kube-proxy` table (read with
 * `nft list table`, read only) or through a file: a `render --proxy-mode=nftables` output, any
 * `nft -f` transaction, or an `nft list` listing. A rule the tracer cannot read stops the trace with
 * verdict UNKNOWN, naming it.
 * @throws {Error} when the table cannot be read; the message says why.
 */
export async function traceNftables(
  q: TraceQuery,
  { exec, nodeIPs }: Pick<TraceDeps, "exec" | "nodeIPs">,
): Promise<TraceResult> {
  const family = addressFamily(q.dst) ?? "IPv4";
  let text = await queryRules(q);
  if (text === undefined) {
    const fam = family === "IPv4" ? "ip" : "ip6";
    const r = await exec.run("nft", { args: ["list", "table", fam, TABLE] });
    if (r.code !== 0) {
      throw new Error(`nft list table ${fam} ${TABLE}: ${r.stderr.trim() || `exit ${r.code}`}`);
    }
    text = r.stdout;
  }
  const ruleset = parseRuleset(text);
  if (ruleset.table(family, TABLE) === undefined) {
    throw new Error(`no ${family === "IPv4" ? "ip" : "ip6"} ${TABLE} table in the rules`);
  }
  const pkt = queryPacket(q, family, nodeIPs);
  const none = { redirects: [], marked: false, unsupported: [] as string[] };
  try {
    const r = traceNft(ruleset, family, TABLE, pkt, nodeIPs, { exploreHashes: q.exploreHashes });
    return { ...none, ...r, path: r.steps };
  } catch (e) {
    return {
      ...none,
      endpoints: [],
      reach: [],
      masq: false,
      masqMixed: false,
      affinity: false,
      verdict: "UNKNOWN",
      path: [],
      unsupported: [(e as Error).message],
    };
  }
}

/** The ruleset of a listing or a transaction, parsed once for all the traces that read it. */
const parseRuleset = lastParsed((text: string) => {
  const ruleset = new NftRuleset();
  ruleset.apply(isListing(text) ? listingStatements(text).join("\n") : text);
  return ruleset;
});

/** Returns true for an `nft list` listing (rather than `nft -f` statements). */
export function isListing(text: string): boolean {
  return /^\s*table (ip|ip6|inet) \S+ \{/.test(text);
}

/** Returns true for nftables rules: a listing, or `nft -f` statements (a render output). */
export function isNftText(text: string): boolean {
  return isListing(text) || /^(# nft -f|add table (ip|ip6|inet) )/m.test(text);
}
