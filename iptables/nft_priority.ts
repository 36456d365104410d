/**
 * A base chain's hook and priority as nft writes them (`type filter hook input priority dstnat - 10;`)
 * and as the kernel holds them (the priority a number, whatever name it was given).
 * @module
 */

/** A base chain's hook as the kernel holds it: priority is a number whatever name it was given. */
export interface NftBaseHook {
  readonly type: string;
  readonly hook: string;
  readonly priority: number;
}

/** nft's standard priority names in the ip and ip6 families. */
const PRIORITY_NAMES: Readonly<Record<string, number>> = {
  raw: -300,
  mangle: -150,
  dstnat: -100,
  filter: 0,
  security: 50,
  srcnat: 100,
};

/**
 * Returns the number a priority stands for: `-110`, `dstnat`, `dstnat - 10` (ip and ip6 names).
 * @throws {Error} naming the text when it is none of these.
 */
export function priorityValue(text: string): number {
  const m = /^\s*(?:([a-z]+)\s*(?:([+-])\s*(\d+))?|(-?\d+))\s*$/.exec(text);
  const named = m?.[1] === undefined ? undefined : PRIORITY_NAMES[m[1]];
  if (m === null || (m[1] !== undefined && named === undefined)) {
    throw new Error(`not an nft priority: ${text}`);
  }
  if (m[4] !== undefined) return Number(m[4]);
  return named! + (m[3] === undefined ? 0 : Number(m[3]) * (m[2] === "-" ? -1 : 1));
}

/** Parses a base chain's declaration (`type filter hook input priority -110; policy accept;`). */
export function parseBaseHook(decl: string): NftBaseHook | undefined {
  const m = /\btype (\S+) hook (\S+)(?: device \S+)? priority ([^;]+);/.exec(decl);
  return m === null ? undefined : { type: m[1], hook: m[2], priority: priorityValue(m[3]) };
}
