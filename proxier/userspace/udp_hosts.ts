/**
 * Where the userspace mode's UDP sockets bind. A datagram socket on every address (0.0.0.0) answers
 * from the address the kernel routes the reply by, not the one the client asked: a pod asking the
 * node's address through its veth gets the reply from the veth's address, and a connected client
 * (as upstream's e2e clients and most DNS resolvers are) drops it. So UDP NodePorts bind each
 * address they answer on, and the UDP portals bind one address that their rules DNAT to (a
 * REDIRECT rewrites to the address of the interface the datagram came in on, or 127.0.0.1 for the
 * node's own, which a socket bound elsewhere cannot answer from).
 * @module
 */
import { isLoopback } from "../model/net.ts";
import type { IPFamily } from "../model/types.ts";

/** The UDP portal address: the listen address when it names one, else the node's first of the family. */
export function udpPortalAddress(
  listenAddress: string,
  family: IPFamily,
  nodeIPs: readonly string[],
): string {
  const wildcard = listenAddress === "0.0.0.0" || listenAddress === "::";
  if (!wildcard) return listenAddress;
  return nodeIPs.find((ip) => !isLoopback(ip)) ?? (family === "IPv4" ? "127.0.0.1" : "::1");
}

/**
 * The addresses UDP NodePorts bind, each on its own: every node address NodePorts answer on, and the
 * IPv4 loopback where they answer there (a socket on 0.0.0.0 would have covered it).
 */
export function udpNodePortHosts(
  npa: { nodeIPs(local: readonly string[]): string[]; contains(ip: string): boolean },
  nodeIPs: readonly string[],
  family: IPFamily,
): string[] {
  const hosts = npa.nodeIPs(nodeIPs);
  if (family === "IPv4" && !hosts.includes("127.0.0.1") && npa.contains("127.0.0.1")) hosts.push("127.0.0.1");
  return hosts;
}
