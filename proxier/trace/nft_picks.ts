/**
 * How an nftables DNAT picks an endpoint, as the kernel computes it: `numgen random|inc mod N`
 * can give any index (the interpreter explores them all, each an equal share), `jhash <fields> mod N
 * seed S` gives the one index this packet's fields hash to (`loadbalancer/jhash.ts`, each field in
 * network byte order, padded to 4 bytes). The interpreter (`nft_walker.ts`) looks the indices up.
 * @module
 */
import { ipBytes } from "../../iptables/ip.ts";
import { nftJhash, portBytes } from "../../loadbalancer/jhash.ts";

/** The packet's fields a hash may read, as the DNAT sees them (after earlier rewrites). */
export interface HashInput {
  readonly fam: "ip" | "ip6";
  readonly protocol: string;
  readonly saddr: string;
  readonly daddr: string;
  readonly sport: number;
  readonly dport: number;
}

/** The pick that ends a DNAT key. */
export interface KeyPick {
  /** Where the pick starts among the key's tokens (what precedes it is a plain expression). */
  readonly at: number;
  /** The pick as written: `numgen random mod 3`, `jhash ip saddr . th sport mod 16381 seed 0x...`. */
  readonly expr: string;
  /** The modulus N. */
  readonly of: number;
  /** For a hash: the index it gives for this packet. */
  readonly slot?: number;
}

/**
 * Returns the pick that ends the DNAT key `keyTokens` (the tokens between `to` and `map`), or
 * undefined for a key without one.
 * @throws {Error} naming `rule` for a modulus or hash field the interpreter does not know.
 */
export function dnatPick(keyTokens: readonly string[], input: HashInput, rule: string): KeyPick | undefined {
  const numgen = keyTokens.indexOf("numgen");
  const jhash = keyTokens.indexOf("jhash");
  const at = numgen >= 0 ? numgen : jhash;
  if (at < 0) return undefined;
  const expr = keyTokens.slice(at);
  const mod = expr.indexOf("mod");
  const of = Number(expr[mod + 1]);
  if (!(of > 0)) throw new Error(`nft tracer: unsupported modulus in: ${rule}`);
  const seedAt = expr.indexOf("seed");
  return {
    at,
    expr: expr.join(" "),
    of,
    ...(numgen >= 0
      ? {}
      : { slot: jhashIndex(expr.slice(1, mod), of, seedAt < 0 ? 0 : Number(expr[seedAt + 1]), input, rule) }),
  };
}

/**
 * Returns the indices `pick` can give: every one for `numgen` (and for a hash when `explore`), else
 * the hash's own.
 */
export function pickIndices(pick: KeyPick, explore: boolean): number[] {
  if (pick.slot !== undefined && !explore) return [pick.slot];
  return Array.from({ length: pick.of }, (_, k) => k);
}

/** The index `jhash <fields> mod n seed S` gives for the packet, as the kernel computes it. */
function jhashIndex(fields: readonly string[], n: number, seed: number, p: HashInput, rule: string): number {
  const bytes: Uint8Array[] = [];
  for (let i = 0; i < fields.length; i++) {
    const [a, b] = [fields[i], fields[i + 1]];
    if (a === ".") continue;
    i++;
    if (a === p.fam && (b === "saddr" || b === "daddr")) {
      bytes.push(ipBytes(b === "saddr" ? p.saddr : p.daddr)!);
    } else if ((a === "th" || a === p.protocol) && b === "sport") {
      bytes.push(portBytes(p.sport));
    } else if ((a === "th" || a === p.protocol) && b === "dport") {
      bytes.push(portBytes(p.dport));
    } else throw new Error(`nft tracer: unsupported jhash field "${a} ${b}" in: ${rule}`);
  }
  return nftJhash(bytes, n, seed);
}
