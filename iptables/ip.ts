/**
 * Addresses as the kernel tools see them. This folder imports nothing from the proxy's model, so it
 * keeps its own family type (the model's `IPFamily` is the same union).
 * @module
 */
import { BlockList, isIPv4, isIPv6 } from "node:net";

/** The IP family one tool instance works on: `iptables` vs `ip6tables`, `-f ipv6`, ... */
export type IPFamily = "IPv4" | "IPv6";

/** Returns the family of an IP literal as the kernel reads it, or undefined. */
export function addressFamily(ip: string): IPFamily | undefined {
  return isIPv4(ip) ? "IPv4" : isIPv6(ip) ? "IPv6" : undefined;
}

/** Returns true when `ip` lies inside `cidr` (`a.b.c.d/n`); false for another family or garbage. */
export function inCIDR(ip: string, cidr: string): boolean {
  const slash = cidr.indexOf("/");
  const net = cidr.slice(0, slash);
  const f = addressFamily(net);
  if (slash < 0 || f === undefined || addressFamily(ip) !== f) return false;
  const type = f === "IPv4" ? "ipv4" : "ipv6";
  const list = new BlockList();
  list.addSubnet(net, Number(cidr.slice(slash + 1)), type);
  return list.check(ip, type);
}
