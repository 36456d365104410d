/**
 * Addresses as the kernel tools see them. This folder imports nothing from the proxy's model, so it
 * keeps its own family type (the model's `IPFamily` is the same union).
 * @module
 */
/** The IP family one tool instance works on: `iptables` vs `ip6tables`, `-f ipv6`, ... */
export type IPFamily = "IPv4" | "IPv6";

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const HEXTET = /^[0-9a-fA-F]{1,4}$/;

/**
 * Counts the 16-bit words of IPv6 `groups` (a dotted IPv4 `last` group counts two), appending them
 * to `out` when given; -1 when a group is malformed.
 */
function groupWords(groups: readonly string[], last: boolean, out: number[] | undefined): number {
  let n = 0;
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i];
    if (last && i === groups.length - 1 && g.includes(".")) {
      if (!IPV4.test(g)) return -1;
      if (out !== undefined) {
        const [a, b, c, d] = g.split(".").map(Number);
        out.push(a << 8 | b, c << 8 | d);
      }
      n += 2;
    } else if (HEXTET.test(g)) {
      out?.push(parseInt(g, 16));
      n++;
    } else return -1;
  }
  return n;
}

/**
 * True when `ip` is an IPv6 literal (`::` once, a dotted IPv4 tail; no zone); its eight words go to
 * `out` when given. Without `out` it builds no word list: every Service's cluster IPs pass here in
 * each family's first sync.
 */
function ipv6Words(ip: string, out: number[] | undefined): boolean {
  if (ip.length > 45 || !ip.includes(":")) return false;
  const halves = ip.split("::");
  if (halves.length > 2) return false;
  const head = halves[0] === "" ? 0 : groupWords(halves[0].split(":"), halves.length === 1, out);
  if (head < 0) return false;
  const tail = halves.length === 1 || halves[1] === "" ? 0 : groupWords(halves[1].split(":"), true, out);
  if (tail < 0) return false;
  const n = head + tail;
  if (halves.length === 1 ? n !== 8 : n > 7) return false;
  out?.splice(head, 0, ...Array(8 - n).fill(0));
  return true;
}

/**
 * Returns the bytes of an IP literal: 4 for dotted IPv4 (no leading zeros), 16 for IPv6 (`::`
 * once, a dotted IPv4 tail; no zone), else undefined. Written here rather than taken from
 * `node:net`, whose import loads Deno's Node compatibility layer (about 9 MiB of resident memory
 * in a process that needs nothing else of it).
 */
export function ipBytes(ip: string): Uint8Array | undefined {
  if (IPV4.test(ip)) return Uint8Array.from(ip.split(".").map(Number));
  const words: number[] = [];
  if (!ipv6Words(ip, words)) return undefined;
  return Uint8Array.from(words.flatMap((w) => [w >> 8, w & 255]));
}

/**
 * Returns the family of an IP literal as the kernel reads it ({@linkcode ipBytes}), or undefined.
 * Every endpoint address passes here: IPv4 costs one regular expression test, IPv6 one split per
 * `::` half and a test per group, neither a byte array.
 */
export function addressFamily(ip: string): IPFamily | undefined {
  if (IPV4.test(ip)) return "IPv4";
  return ipv6Words(ip, undefined) ? "IPv6" : undefined;
}

/** Returns true when `ip` lies inside `cidr` (`a.b.c.d/n`); false for another family or garbage. */
export function inCIDR(ip: string, cidr: string): boolean {
  const slash = cidr.indexOf("/");
  if (slash < 0) return false;
  const net = ipBytes(cidr.slice(0, slash));
  const addr = ipBytes(ip);
  const bitsText = cidr.slice(slash + 1);
  const bits = Number(bitsText);
  if (
    net === undefined || addr?.length !== net.length || !/^\d{1,3}$/.test(bitsText) || bits > net.length * 8
  ) {
    return false;
  }
  for (let i = 0; i < net.length && i * 8 < bits; i++) {
    const mask = bits - i * 8 >= 8 ? 255 : (0xff00 >> (bits - i * 8)) & 255;
    if ((addr[i] & mask) !== (net[i] & mask)) return false;
  }
  return true;
}
