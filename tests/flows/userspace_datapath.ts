/**
 * The userspace mode in the flow table: the real proxier with its portal rules on the fake
 * iptables and its listeners on fake sockets (nothing is bound); a packet follows the portal
 * REDIRECT (or reaches a NodePort listener) and the proxier says which endpoints it balances over.
 * @module
 */
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { tracePacket } from "../../proxier/trace/iptables_walker.ts";
import { UserspaceProxier } from "../../proxier/userspace/proxier.ts";
import { baseOptions } from "../support/fixtures.ts";
import { unboundListen } from "../../proxier/socket_proxy/listen.ts";
import { type Datapath, feed, type FlowResult, tracerPacket, withView } from "./datapath.ts";

/** The userspace adapter. */
export const userspaceDatapath: Datapath = {
  mode: "userspace",
  reportsMasquerade: false,
  async load(setup) {
    const portals = new FakeIPTables();
    const listenAddress = "0.0.0.0";
    const proxier = new UserspaceProxier({
      ...baseOptions(),
      iptables: portals,
      listenAddress,
      nodePortAddresses: setup.options.nodePortAddresses ?? [],
      allowExternalIPs: setup.options.allowExternalIPs,
      nodeIPs: setup.node.ips,
      portRange: { min: 0, max: 0 },
      udpIdleTimeoutMs: 250,
      listen: unboundListen,
    });
    feed(proxier, setup);
    await proxier.syncNow();
    return withView(proxier, (p): FlowResult => {
      const protocol = p.proto.toUpperCase() as "TCP" | "UDP" | "SCTP";
      const t = tracePacket(portals, tracerPacket(p), setup.node.ips);
      // A portal redirects to the proxy port on the address the packet arrived at; anything else
      // can only be one of our NodePort listeners.
      const route = t.redirects.length > 0
        ? proxier.route(protocol, p.fromNode ? "127.0.0.1" : p.dst, t.redirects[0])
        : setup.node.ips.includes(p.dst) || p.dst.startsWith("127.")
        ? proxier.route(protocol, p.dst, p.port)
        : undefined;
      if (route === undefined) return { endpoints: [], masquerade: false, verdict: "none" };
      // Outside the port's source ranges: closed at once (a datagram dropped).
      if (route.endpoints.length === 0 || route.admits?.(p.src) === false) {
        return { endpoints: [], masquerade: false, verdict: protocol === "UDP" ? "DROP" : "REJECT" };
      }
      if (p.again !== true) {
        return { endpoints: [...route.endpoints].sort(), masquerade: true, verdict: "DNAT" };
      }
      // Real picks: one first connection, then every endpoint the next connections get.
      proxier.pick(route.service, p.src);
      const next = new Set(route.endpoints.map(() => proxier.pick(route.service, p.src)!));
      return { endpoints: [...next].sort(), masquerade: true, verdict: "DNAT" };
    });
  },
};
