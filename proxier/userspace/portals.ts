/**
 * Userspace "portals": nat REDIRECT rules that send traffic for cluster, external and
 * load-balancer IPs to the proxy's own listening port, as upstream's userspace proxier.
 * @module
 */
import type { Chain, IPTables } from "../../iptables/iptables.ts";
import { hostPrefix } from "../model/net.ts";
import type { ServicePortInfo } from "../model/types.ts";
import { servicePortNameString } from "../model/types.ts";
import type { ClassPlan } from "./traffic_classes.ts";

/** nat chain for traffic arriving from other hosts and pods (PREROUTING). */
export const KUBE_PORTALS_CONTAINER: Chain = "KUBE-PORTALS-CONTAINER";
/** nat chain for traffic from this host's own processes (OUTPUT). */
export const KUBE_PORTALS_HOST: Chain = "KUBE-PORTALS-HOST";

/** The built-in chains' jumps into the portal chains. */
export const PORTAL_JUMPS: ReadonlyArray<{ from: Chain; to: Chain }> = [
  { from: "PREROUTING", to: KUBE_PORTALS_CONTAINER },
  { from: "OUTPUT", to: KUBE_PORTALS_HOST },
];

/** The arguments of the jump rule from a built-in chain into a portal chain. */
export function jumpArgs(to: Chain): string[] {
  return ["-m", "comment", "--comment", "handle ClusterIP services", "-j", to];
}

/** Creates the portal chains and the jumps into them (idempotent). */
export async function ensurePortalJumps(ipt: IPTables): Promise<void> {
  for (const { from, to } of PORTAL_JUMPS) {
    await ipt.ensureChain("nat", to);
    await ipt.ensureRule("prepend", "nat", from, jumpArgs(to));
  }
}

/**
 * Returns the jumps into the portal chains as restore lines (`-I` at the top of PREROUTING and
 * OUTPUT): what {@linkcode ensurePortalJumps} makes where they are missing, for `render` to show and
 * `trace` to walk.
 */
export function portalJumpLines(): string {
  const jumps = PORTAL_JUMPS.map(({ from, to }) =>
    `-I ${from} ${jumpArgs(to).map((a) => (a.includes(" ") ? `"${a}"` : a)).join(" ")}`
  );
  return ["*nat", ...jumps, "COMMIT", ""].join("\n");
}

/**
 * Returns the restore input for the portal chains: one rule per service address, to the proxy port
 * of the traffic class that serves it (`traffic_classes.ts`). TCP is REDIRECTed (the accepted
 * socket answers from the address the connection was redirected to). UDP is DNATed to `udpAddress`
 * (one address the proxy's UDP sockets bind): a socket on every address cannot tell which one a
 * datagram came in on, and its reply would leave from another address than conntrack expects, so
 * the client, connected to the service address, would drop it.
 */
export function portalRules(
  ports: ReadonlyArray<{ info: ServicePortInfo; plan: Pick<ClassPlan, "portalIPs">; proxyPort: number }>,
  udpAddress?: string,
): string {
  const lines = ["*nat", `:${KUBE_PORTALS_CONTAINER} - [0:0]`, `:${KUBE_PORTALS_HOST} - [0:0]`];
  const sorted = [...ports].sort((a, b) =>
    servicePortNameString(a.info.name).localeCompare(servicePortNameString(b.info.name)) ||
    a.info.protocol.localeCompare(b.info.protocol)
  );
  for (const { info, plan, proxyPort } of sorted) {
    if (proxyPort === 0) continue;
    const proto = info.protocol.toLowerCase();
    const comment = `"${servicePortNameString(info.name)}"`;
    const ips = plan.portalIPs;
    const target = proto === "udp" && udpAddress !== undefined
      ? `-j DNAT --to-destination ${udpAddress.includes(":") ? `[${udpAddress}]` : udpAddress}:${proxyPort}`
      : `-j REDIRECT --to-ports ${proxyPort}`;
    for (const chain of [KUBE_PORTALS_CONTAINER, KUBE_PORTALS_HOST]) {
      for (const ip of ips) {
        lines.push(
          `-A ${chain} -d ${ip}${hostPrefix(ip)} -p ${proto} -m comment --comment ${comment} ` +
            `-m ${proto} --dport ${info.port} ${target}`,
        );
      }
    }
  }
  lines.push("COMMIT", "");
  return lines.join("\n");
}
