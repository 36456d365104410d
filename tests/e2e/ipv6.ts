/**
 * IPv6 beside the IPv4 of a test topology (`netns.ts`): the node's address on its link, each pod's
 * and client's, and routes through the node, as a dual-stack node's.
 * @module
 */
import type { Pod, Topology } from "./netns.ts";

/** The IPv6 addresses {@linkcode addIPv6} gives: the node's, pod n's (from 1) and its gateway on the node. */
export const V6 = {
  node: "fd00:168::2",
  pod: (n: number) => `fd00:180:${n}::2`,
  gw: (n: number) => `fd00:180:${n}::1`,
  /** A client's: the host part of its IPv4 address, in hex. */
  client: (c: Pod) => `fd00:168::${Number(c.ip.split(".")[3]).toString(16)}`,
};

/** Adds IPv6 to the topology: the node's link, each pod's veth, each client, routes through the node. */
export async function addIPv6(t: Topology, pods: readonly Pod[], clients: readonly Pod[]): Promise<void> {
  await t.exec(t.node, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
  await t.exec(t.node, ["ip", "-6", "addr", "add", `${V6.node}/64`, "dev", "br0", "nodad"]);
  // Like a real node, a default route: service addresses are routed before NAT.
  await t.exec(t.node, ["ip", "-6", "route", "add", "default", "via", "fd00:168::1", "dev", "br0", "onlink"]);
  for (const [i, pod] of pods.entries()) {
    const n = i + 1;
    await t.exec(t.node, ["ip", "-6", "addr", "add", `${V6.gw(n)}/64`, "dev", `kp${t.id}h${n}`, "nodad"]);
    await t.exec(pod.ns, ["ip", "-6", "addr", "add", `${V6.pod(n)}/64`, "dev", "eth0", "nodad"]);
    await t.exec(pod.ns, ["ip", "-6", "route", "add", "default", "via", V6.gw(n)]);
  }
  for (const c of clients) {
    await t.exec(c.ns, ["ip", "-6", "addr", "add", `${V6.client(c)}/64`, "dev", "eth0", "nodad"]);
    await t.exec(c.ns, ["ip", "-6", "route", "add", "default", "via", V6.node]);
  }
}
