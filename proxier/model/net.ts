/**
 * Strict parsing of the addresses, CIDRs and ports that reach kernel rules. Everything that ends
 * up in an iptables-restore or ipvsadm batch passes through one of these first, so no object
 * field can smuggle text into a batch.
 * @module
 */
import { addressFamily, inCIDR } from "../../iptables/ip.ts";
import type { IPFamily, Protocol } from "./types.ts";

/** Returns the family of a strictly valid IP literal (no leading zeros, no zone), or undefined. */
export function ipFamily(ip: unknown): IPFamily | undefined {
  return typeof ip === "string" ? addressFamily(ip) : undefined;
}

/** Returns true when `ip` is a valid literal of `family`. */
export function isIP(ip: unknown, family?: IPFamily): ip is string {
  const f = ipFamily(ip);
  return f !== undefined && (family === undefined || f === family);
}

/** Returns the family of a valid `ip/prefix` CIDR, or undefined. */
export function cidrFamily(cidr: unknown): IPFamily | undefined {
  if (typeof cidr !== "string") return undefined;
  const slash = cidr.indexOf("/");
  if (slash < 0) return undefined;
  const f = ipFamily(cidr.slice(0, slash));
  const bits = cidr.slice(slash + 1);
  if (f === undefined || !/^(0|[1-9]\d{0,2})$/.test(bits)) return undefined;
  return Number(bits) <= (f === "IPv4" ? 32 : 128) ? f : undefined;
}

/** Returns true for loopback addresses (127.0.0.0/8, ::1). */
export function isLoopback(ip: string): boolean {
  return ip.startsWith("127.") || ip === "::1";
}

/** Returns true when `p` is an integer port in 1..65535. */
export function isPort(p: unknown): p is number {
  return typeof p === "number" && Number.isInteger(p) && p >= 1 && p <= 65535;
}

/** Returns the protocol for a Kubernetes protocol string (default TCP when unset), or undefined. */
export function parseProtocol(p: unknown): Protocol | undefined {
  if (p === undefined || p === null) return "TCP";
  return p === "TCP" || p === "UDP" || p === "SCTP" ? p : undefined;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Returns true for a DNS-1123 label of at most 63 characters (names, namespaces, port names). */
export function isDNSLabel(s: unknown): s is string {
  return typeof s === "string" && s.length <= 63 && DNS_LABEL.test(s);
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Returns true for a Kubernetes label value (zone names): at most 63 characters, may be empty. */
export function isLabelValue(s: unknown): s is string {
  return typeof s === "string" && s.length <= 63 && LABEL_VALUE.test(s);
}

/** Returns true for a DNS-1123 subdomain of at most 253 characters (EndpointSlice names). */
export function isDNSSubdomain(s: unknown): s is string {
  return typeof s === "string" && s.length <= 253 && s.split(".").every((l) => DNS_LABEL.test(l));
}

/** Returns the prefix of a CIDR's family for a host: `/32` or `/128`. */
export function hostPrefix(ip: string): string {
  return ip.includes(":") ? "/128" : "/32";
}

/** Returns true when `ip` lies inside `cidr` (both strictly valid, same family). */
export function cidrContains(cidr: string, ip: string): boolean {
  const f = cidrFamily(cidr);
  return f !== undefined && ipFamily(ip) === f && inCIDR(ip, cidr);
}

/**
 * Returns a valid CIDR with its host bits cleared (`10.244.1.0/16` -> `10.244.0.0/16`), as Go's
 * `net.ParseCIDR` gives upstream the network; IPv6 networks come back in canonical form.
 */
export function normalizeCIDR(cidr: string): string {
  const [ip, bitsText] = cidr.split("/");
  const bits = Number(bitsText);
  if (ipFamily(ip) === "IPv4") {
    const n = ip.split(".").reduce((a, o) => a * 256 + Number(o), 0);
    const net = bits === 0 ? 0 : n - (n % 2 ** (32 - bits));
    return `${[24, 16, 8, 0].map((s) => Math.floor(net / 2 ** s) % 256).join(".")}/${bits}`;
  }
  const [head, tail = ""] = ip.split("::");
  // A trailing dotted quad (`::ffff:1.2.3.4`) is the last two groups.
  const groups = (s: string) =>
    s === "" ? [] : s.split(":").flatMap((g) => {
      if (!g.includes(".")) return [g];
      const o = g.split(".").map(Number);
      return [((o[0] << 8) | o[1]).toString(16), ((o[2] << 8) | o[3]).toString(16)];
    });
  const h = groups(head);
  const t = groups(tail);
  const all = ip.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  let n = all.reduce((a, g) => (a << 16n) + BigInt(parseInt(g, 16)), 0n);
  n &= ((1n << 128n) - 1n) ^ ((1n << BigInt(128 - bits)) - 1n);
  const out = Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16));
  // The longest run of zero groups (two or more) becomes "::".
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && out[j] === "0") j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const text = best < 0
    ? out.join(":")
    : `${out.slice(0, best).join(":")}::${out.slice(best + bestLen).join(":")}`;
  return `${text}/${bits}`;
}

/** Splits `cidrs` into `family`'s, normalized, and those that are no CIDR at all. */
export function familyCIDRs(cidrs: readonly string[], family: IPFamily): { mine: string[]; bad: string[] } {
  return {
    mine: cidrs.filter((c) => cidrFamily(c) === family).map(normalizeCIDR),
    bad: cidrs.filter((c) => cidrFamily(c) === undefined),
  };
}
