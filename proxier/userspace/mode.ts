/**
 * The userspace mode as the program sees it: one IPv4 proxier with portal rules when iptables
 * works (and `--userspace-portals` allows), NodePort listeners always, and `--cleanup`.
 * @module
 */
import { onEveryIptablesBackend, probeIptables, probeIptablesBackend } from "../kernel_tools.ts";
import { proxierOptions, type ProxyModeDefinition } from "../mode_definition.ts";
import { cidrContains } from "../net.ts";
import { NODE_PORT_PRIMARY } from "../options/values.ts";
import { cleanupUserspace } from "./portals.ts";
import { UserspaceProxier } from "./proxier.ts";

/** The local addresses NodePorts answer on: those inside `--nodeport-addresses`, or all. */
function nodePortAddresses(cidrs: readonly string[]): string[] {
  if (cidrs.length === 0) return ["0.0.0.0"];
  const v4 = Deno.networkInterfaces().filter((i) => i.family === "IPv4");
  // `primary`: no Node is known before the proxy starts; the first non-loopback address stands in.
  const primary = v4.find((i) => !i.address.startsWith("127."))?.address;
  return v4
    .filter((i) =>
      cidrs.some((c) => c === NODE_PORT_PRIMARY ? i.address === primary : cidrContains(c, i.address))
    )
    .map((i) => i.address);
}

/** The userspace mode: the fallback when the kernel tools are missing. */
export const userspaceMode: ProxyModeDefinition = {
  name: "userspace",
  // Its one tool, iptables for the portals, is probed at start; the proxier says what is lost.
  tools: [],

  async create(d) {
    const c = d.config;
    return new UserspaceProxier({
      ...proxierOptions(d, "IPv4"),
      iptables: c.userspacePortals
        ? await probeIptables(
          d.exec,
          d.log,
          "IPv4",
          await probeIptablesBackend(d.exec, d.log, c.iptablesBackend),
        )
        : undefined,
      listenAddress: c.bindAddress,
      nodePortAddresses: nodePortAddresses(c.nodePortAddresses),
      portRange: c.portRange,
      udpIdleTimeoutMs: c.udpIdleTimeoutMs,
      tcpLimits: { idleTimeoutMs: c.tcpIdleTimeoutMs, writeTimeoutMs: c.tcpWriteTimeoutMs },
      // Fewer sockets per event loop keep the latency tail near the mean (see tcp_worker.ts): two
      // loops per core (measured on 2 cores, 1,000 connections: p99 3 s with none, 181 ms with 2,
      // 52 ms with 4, at the same rate).
      tcpWorkers: c.userspaceTcpWorkers ?? Math.min(2 * navigator.hardwareConcurrency, 8),
    });
  },

  cleanup(exec, family) {
    return onEveryIptablesBackend(exec, family, cleanupUserspace);
  },
};
