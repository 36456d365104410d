/**
 * Addresses as the kernel tools see them. This folder imports nothing from the proxy's model, so it
 * keeps its own family type (the model's `IPFamily` is the same union).
 * @module
 */
/** The IP family one tool instance works on: `iptables` vs `ip6tables`, `-f ipv6`, ... */
export type IPFamily = "IPv4" | "IPv6";

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const HEXTET = /^[0-9a-fA-F]{1,4}$/;

function ipv4Bytes(ip: string): number[] | undefined {
  return IPV4.test(ip) ? ip.split(".").map(Number) : undefined;
}

function hextets(groups: string[], last: boolean): number[] | undefined {
  const out: number[] = [];
  for (const [i, g] of groups.entries()) {
    if (last && i === groups.length - 1 && g.includes(".")) {
      const v4 = ipv4Bytes(g);
      if (v4 === undefined) return undefined;
      out.push(v4[0] << 8 | v4[1], v4[2] << 8 | v4[3]);
    } else if (HEXTET.test(g)) out.push(parseInt(g, 16));
    else return undefined;
  }
  return out;
}

/**
 * Returns the bytes of an IP literal: 4 for dotted IPv4 (no leading zeros), 16 for IPv6 (`::`
 * once, a dotted IPv4 tail; no zone), else undefined. Written here rather than taken from
 * `node:net`, whose import loads Deno's Node compatibility layer (about 9 MiB of resident memory
 * in a process that needs nothing else of it).
 */
export function ipBytes(ip: string): Uint8Array | undefined {
  if (ip.length > 45) return undefined;
  const v4 = ipv4Bytes(ip);
  if (v4 !== undefined) return Uint8Array.from(v4);
  if (!ip.includes(":")) return undefined;
  const halves = ip.split("::");
  if (halves.length > 2) return undefined;
  const head = halves[0] === "" ? [] : hextets(halves[0].split(":"), halves.length === 1);
  const tail = halves.length === 1 || halves[1] === "" ? [] : hextets(halves[1].split(":"), true);
  if (head === undefined || tail === undefined) return undefined;
  const n = head.length + tail.length;
  if (halves.length === 1 ? n !== 8 : n > 7) return undefined;
  const words = [...head, ...Array(8 - n).fill(0), ...tail];
  return Uint8Array.from(words.flatMap((w) => [w >> 8, w & 255]));
}

/**
 * Returns the family of an IP literal as the kernel reads it ({@linkcode ipBytes}), or undefined.
 * Every endpoint address passes here: IPv4 costs one regular expression test, no allocation.
 */
export function addressFamily(ip: string): IPFamily | undefined {
  if (IPV4.test(ip)) return "IPv4";
  return ip.includes(":") && ipBytes(ip) !== undefined ? "IPv6" : undefined;
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
