/**
 * The userspace mode as the program sees it: a proxier per IP family, each with portal rules when
 * its iptables works (and `--userspace-portals` allows) and NodePort listeners always, and
 * `--cleanup`.
 * @module
 */
import { probeIptables, probeIptablesBackend } from "../_common/iptables_backend.ts";
import {
  familyRenderer,
  proxierOptions,
  type ProxyModeDefinition,
  renderNodeAddresses,
} from "../mode_definition.ts";
import { IptablesRunner } from "../../iptables/iptables.ts";
import { unboundListen } from "../socket_proxy/listen.ts";
import { portalJumpLines } from "./portals.ts";
import { cleanupUserspaceMode } from "./cleanup.ts";
import { oneWayPolicy } from "../scheduler_policy.ts";
import { externallyAccessible } from "../model/topology.ts";
import type { ServicePortInfo } from "../model/types.ts";
import { ipFamily } from "../model/net.ts";
import type { IPFamily } from "../model/types.ts";
import { PortAllocator } from "./port_range.ts";

/**
 * Where a family's portal listeners bind: `--bind-address` when it is of that family, else the
 * family's any-address. A portal REDIRECTs to the address the packet came in on (the loopback
 * address for the node's own), so any address must be listened on.
 */
function portalListenAddress(bindAddress: string, family: IPFamily): string {
  if (ipFamily(bindAddress) === family) return bindAddress;
  return family === "IPv4" ? "0.0.0.0" : "::";
}

/** The listeners balance round robin; an rr or wrr annotation asks for just that. */
const SCHEDULERS = oneWayPolicy("userspace", "round robin", ["rr", "wrr"]);

/** The Event reason of a Service whose client address a proxy cannot keep. */
export const CLIENT_ADDRESS_NOT_KEPT = "ClientAddressNotKept";

/**
 * What the mode says of a port it cannot serve as asked: externalTrafficPolicy Local keeps the
 * client's address, and a proxy that opens its own connection cannot (it does route external
 * traffic to this node's endpoints only).
 */
export function userspaceNotice(port: ServicePortInfo): { reason: string; msg: string } | undefined {
  if (!port.externalPolicyLocal || !externallyAccessible(port)) return undefined;
  return {
    reason: CLIENT_ADDRESS_NOT_KEPT,
    msg: "externalTrafficPolicy Local: userspace mode sends external connections to this node's endpoints " +
      "only, but it opens its own connection to them, so they see the node's address, not the client's " +
      "(iptables, nftables and ipvs modes keep it)",
  };
}

/** The userspace mode: the fallback when the kernel tools are missing. */
export const userspaceMode: ProxyModeDefinition = {
  name: "userspace",
  traits: {
    carrier: "sockets",
    enforcesSourceRanges: true,
    externalLocal: "local-for-all",
    rejectsUnservedPorts: "none",
    dropsUnallocatedServiceIPs: false,
    dropsInvalid: false,
    hairpin: "local-endpoints",
  },
  migrationAdvice: { localhostNodePorts: "include `localhost` in `--nodeport-addresses`" },
  schedulers: () => SCHEDULERS,
  // Its one tool, iptables for the portals, is probed at start; the proxier says what is lost.
  tools: [],

  async create(d) {
    const c = d.config;
    // Loaded when this mode runs: the other modes' runs need none of its code.
    const [{ UserspaceProxier }, { userspaceProvider }] = await Promise.all([
      import("./proxier.ts"),
      import("./families.ts"),
    ]);
    const backend = c.userspacePortals
      ? await probeIptablesBackend(d.exec, d.log, c.iptablesBackend)
      : undefined;
    // A flag's choice holds for both families: one line, not one per family.
    if (!c.userspacePortals) {
      d.log.warn("No portal rules: only NodePorts are served", { reason: "--userspace-portals=false" });
    }
    // One range for both families: their portal listeners never ask for the same port.
    const allocator = new PortAllocator(c.portRange);
    const families = [];
    for (const family of ["IPv4", "IPv6"] as const) {
      const iptables = c.userspacePortals ? await probeIptables(d.exec, d.log, family, backend) : undefined;
      families.push(
        new UserspaceProxier({
          ...proxierOptions(d, family, SCHEDULERS),
          portNotice: userspaceNotice,
          // externalTrafficPolicy Local is served here too: the load balancer asks which nodes have endpoints.
          healthServer: d.healthServer,
          iptables,
          // The one cause that holds: the probe logs its own failure.
          noPortals: !c.userspacePortals
            ? false
            : Deno.uid() !== 0
            ? "not running as root"
            : `${family === "IPv4" ? "iptables" : "ip6tables"} is not usable (see above)`,
          listenAddress: portalListenAddress(c.bindAddress, family),
          nodeIPs: d.interfaceIPs().filter((ip) => ipFamily(ip) === family),
          portRange: c.portRange,
          allocator,
          udpIdleTimeoutMs: c.udpIdleTimeoutMs,
          tcpLimits: { idleTimeoutMs: c.tcpIdleTimeoutMs, writeTimeoutMs: c.tcpWriteTimeoutMs },
          // Fewer sockets per event loop keep the latency tail near the mean (see tcp_worker.ts): two
          // loops per core. The IPv6 side's TCP stays on this thread: each worker costs ~9 MiB, and a
          // second pool would double that for the fewer connections a dual-stack node's IPv6 side sees.
          tcpWorkers: family === "IPv6"
            ? 0
            : c.userspaceTcpWorkers ?? Math.min(2 * navigator.hardwareConcurrency, 8),
        }),
      );
    }
    return userspaceProvider(families);
  },

  async render(d, dryRun) {
    const { UserspaceProxier } = await import("./proxier.ts");
    const allocator = new PortAllocator(d.config.portRange);
    const families = (["IPv4", "IPv6"] as const).map((family) =>
      new UserspaceProxier({
        ...proxierOptions(d, family, SCHEDULERS),
        portNotice: userspaceNotice,
        ...renderNodeAddresses(d),
        iptables: new IptablesRunner({ exec: dryRun, family }),
        listenAddress: portalListenAddress(d.config.bindAddress, family),
        portRange: d.config.portRange,
        allocator,
        udpIdleTimeoutMs: d.config.udpIdleTimeoutMs,
        // Nothing is bound: the portal rules and the listeners' routes are what a sync would make.
        listen: unboundListen,
        tcpWorkers: 0,
      })
    );
    return familyRenderer(
      families,
      (p) => {
        const cmd = p.family === "IPv4" ? "iptables" : "ip6tables";
        return `# ${cmd}-restore --noflush input\n${dryRun.lastInput(`${cmd}-restore`) ?? ""}` +
          `# ${cmd} -t nat -I: the jumps into the portal chains, each where the node lacks it\n${portalJumpLines()}`;
      },
      { answer: (c, family) => families.find((p) => p.family === family)?.explain.answer(c) },
    );
  },

  // The portals are iptables REDIRECTs to the listeners' ports; where a listener sends a
  // connection is the process's own state, which explain reads (/debug/services on a live node).
  trace: async (q, d) => (await import("../trace/iptables_trace.ts")).traceIptables(q, d),
  recognizes: async (source) =>
    (await import("../trace/iptables_trace.ts")).natDeclares(source, "KUBE-PORTALS-CONTAINER"),

  cleanup: (exec, family) => cleanupUserspaceMode(exec, family),
};
