/**
 * The ipvs mode as the program sees it: checks at start (IPVS in the kernel, ipset), upstream's
 * sysctls, one proxier per family that has a working iptables, `render` on a dry run, `--cleanup`.
 * @module
 */
import { ConntrackRunner } from "../../iptables/conntrack.ts";
import { IpLinkRunner, KUBE_IPVS_INTERFACE } from "../../iptables/ip_link.ts";
import { ExecError, type Executor } from "../../iptables/executor.ts";
import { IpsetRunner } from "../../iptables/ipset.ts";
import { type IPTables, IptablesRunner } from "../../iptables/iptables.ts";
import { IpvsadmRunner } from "../../iptables/ipvsadm.ts";
import { ensureSysctl, type SysctlKey, SysctlRunner } from "../../iptables/sysctl.ts";
import { FULL_SYNC_PERIOD_MS } from "../proxier_options.ts";
import { ModeUnavailableError } from "../runtime/errors.ts";
import { nodeRef } from "../runtime/events.ts";
import {
  familyProvider,
  familyRenderer,
  type ModeDeps,
  proxierOptions,
  type ProxyModeDefinition,
  renderNodeAddresses,
} from "../mode_definition.ts";
import { probeIptables, probeIptablesBackend } from "../_common/iptables_backend.ts";
import { CONNTRACK_NEED } from "../conntrack/reconciler.ts";
import type { IPFamily } from "../model/types.ts";
import type { SchedulerPolicy } from "../scheduler_policy.ts";
import { KUBE_PROXY_IPVS } from "../options/feature_gates.ts";
import { cleanupIpvs } from "./cleanup.ts";
import type { IpvsProxier, IpvsProxierOptions } from "./proxier.ts";

/** The kernel's IPVS runs every scheduler an annotation names; the rest use `--ipvs-scheduler`. */
function ipvsSchedulers(scheduler: string): SchedulerPolicy {
  return { notice: () => undefined, describe: (svc) => svc.scheduler ?? scheduler };
}

/** Builds one family's ipvs proxier from the program's configuration (loading its code). */
async function newProxier(
  d: ModeDeps,
  family: IPFamily,
  exec: Executor,
  iptables: IPTables,
  extra: Pick<IpvsProxierOptions, "conntrack" | "healthServer" | "nodeIPs" | "nodeIPsFromNode">,
): Promise<IpvsProxier> {
  const c = d.config;
  const { IpvsProxier } = await import("./proxier.ts");
  return new IpvsProxier({
    ...proxierOptions(d, family, ipvsMode.schedulers(c)),
    fullSyncPeriodMs: FULL_SYNC_PERIOD_MS,
    ipvs: new IpvsadmRunner({ exec }),
    ipset: new IpsetRunner({ exec }),
    link: new IpLinkRunner({ exec }),
    iptables,
    scheduler: c.ipvs.scheduler,
    excludeCIDRs: c.ipvs.excludeCIDRs,
    masqueradeAll: c.masqueradeAll,
    masqueradeBit: c.masqueradeBit,
    ...extra,
  });
}

/**
 * Upstream's sysctls for IPVS (strict ARP only when asked; conn_reuse_mode=0 only on kernels from
 * 4.1 up to 5.9, where IPVS's connection reuse was broken, as upstream decides).
 */
export function ipvsSysctls(strictARP: boolean, kernelRelease: string): Array<[SysctlKey, string]> {
  const [major, minor] = kernelRelease.split(/[.-]/).map(Number);
  const v = major * 1000 + minor;
  return [
    ["net.ipv4.vs.conntrack", "1"],
    ...(v >= 4001 && v < 5009 ? [["net.ipv4.vs.conn_reuse_mode", "0"]] as Array<[SysctlKey, string]> : []),
    ["net.ipv4.vs.expire_nodest_conn", "1"],
    ["net.ipv4.vs.expire_quiescent_template", "1"],
    ["net.ipv4.ip_forward", "1"],
    ...(strictARP
      ? [["net.ipv4.conf.all.arp_ignore", "1"], ["net.ipv4.conf.all.arp_announce", "2"]] as Array<
        [SysctlKey, string]
      >
      : []),
  ];
}

/**
 * Said at every ipvs start, as upstream since 1.35. The mode stays here: kube-router's users rely
 * on its schedulers.
 */
export const IPVS_DEPRECATION = "The ipvs proxy mode is deprecated upstream since Kubernetes 1.35 (off by " +
  "default from 1.40, removed in 1.43): its kernel API cannot express every Service behaviour; consider " +
  "--proxy-mode=nftables. kube-proxy-deno keeps it, with kube-router's per-Service schedulers";

/** What ipvsadm says when the kernel has no IPVS (nor a module to load). */
const NO_IPVS_IN_KERNEL = /Protocol not available|Are you sure that IP Virtual Server is built/;

/** The ipvs mode (upstream's, with kube-router's per-Service scheduler annotations). */
export const ipvsMode: ProxyModeDefinition = {
  name: "ipvs",
  traits: {
    carrier: "kernel",
    enforcesSourceRanges: true,
    externalLocal: "local-first",
    rejectsUnservedPorts: "service-ips",
    dropsUnallocatedServiceIPs: false,
    dropsInvalid: false,
    hairpin: "local-endpoints",
  },
  migrationAdvice: {
    localhostNodePorts: "none in ipvs mode (it never serves NodePorts on loopback): use the node's address",
    scheduler: "set `--ipvs-scheduler`, or annotate the Service `kube-router.io/service.scheduler`",
  },
  schedulers: (c) => ipvsSchedulers(c.ipvs.scheduler),
  refuse: (config) =>
    config.features.enabled(KUBE_PROXY_IPVS)
      ? undefined
      : `the ipvs proxy mode is disabled by the ${KUBE_PROXY_IPVS} feature gate; use --proxy-mode=nftables`,
  tools: [
    { tool: "ipvsadm", required: true, without: "programs IPVS (Debian/Ubuntu package ipvsadm)" },
    {
      tool: "ipset",
      required: true,
      without: "holds the service addresses iptables matches (package ipset)",
    },
    { tool: "ip", required: true, without: "binds service addresses on kube-ipvs0 (package iproute2)" },
    {
      tool: "iptables-restore",
      required: true,
      without: "writes the masquerade and filter rules (package iptables)",
    },
    { tool: "sysctl", required: true, without: "sets the IPVS sysctls upstream sets (package procps)" },
    CONNTRACK_NEED,
  ],

  async setup(d) {
    d.log.warn(IPVS_DEPRECATION);
    d.events.record({
      regarding: nodeRef(d.nodeName),
      type: "Warning",
      // Upstream's reason and action (cmd/kube-proxy/app/server_linux.go, kubernetes#134539).
      reason: "IPVSDeprecation",
      action: "ProxyModeCheck",
      note: IPVS_DEPRECATION,
    });
    if (Deno.uid() !== 0) throw new ModeUnavailableError("ipvs mode needs root; try --proxy-mode=iptables");
    const missing: string[] = [];
    const oneLine = (t: string) => t.trim().split("\n").join("; ");
    // `ipvsadm -L` loads ip_vs when it can; it fails when the kernel has no IPVS.
    const probe = await d.exec.run("ipvsadm", { args: ["-L", "-n"] }).catch((e) => ({
      code: -1,
      stderr: String(e),
    }));
    if (probe.code !== 0) {
      missing.push(`IPVS in the kernel (ipvsadm -L: ${oneLine(probe.stderr) || probe.code})`);
    }
    const sets = await d.exec.run("ipset", { args: ["list", "-n"] }).catch((e) => ({
      code: -1,
      stderr: String(e),
    }));
    if (sets.code !== 0) missing.push(`ipset (ipset list: ${oneLine(sets.stderr) || sets.code})`);
    if (missing.length > 0) {
      // A probe that ran and failed may have failed for a moment: say so in the cause, so the start
      // tries again (retryStart) before it gives up on the mode. A kernel without IPVS is for good.
      const ran = [["ipvsadm -L -n", probe], ["ipset list -n", sets]] as const;
      const failed = NO_IPVS_IN_KERNEL.test(probe.stderr) ? undefined : ran.find(([, r]) => r.code > 0);
      throw new ModeUnavailableError(
        `ipvs mode cannot run: no ${missing.join(", no ")}; try --proxy-mode=iptables`,
        failed && { cause: new ExecError(`${failed[0]} exited ${failed[1].code}`, failed[1].code) },
      );
    }
    const sysctl = new SysctlRunner({ exec: d.exec });
    for (const [key, value] of ipvsSysctls(d.config.ipvs.strictARP, Deno.osRelease())) {
      try {
        if (await ensureSysctl(sysctl, key, value)) d.log.info("Set sysctl", { key, value });
      } catch (e) {
        throw new ModeUnavailableError(`ipvs mode cannot set ${key}=${value}: ${(e as Error).message}`, {
          cause: e,
        });
      }
    }
    const t = d.config.ipvs;
    if (t.tcpTimeoutMs > 0 || t.tcpFinTimeoutMs > 0 || t.udpTimeoutMs > 0) {
      const s = (ms: number) => Math.round(ms / 1000);
      await new IpvsadmRunner({ exec: d.exec }).setTimeouts(
        s(t.tcpTimeoutMs),
        s(t.tcpFinTimeoutMs),
        s(t.udpTimeoutMs),
      )
        .catch((e) => d.log.error("Cannot set IPVS timeouts", { error: (e as Error).message }));
    }
  },

  async create(d) {
    const nodeIPs = d.interfaceIPs();
    const backend = await probeIptablesBackend(d.exec, d.log, d.config.iptablesBackend);
    const families: IpvsProxier[] = [];
    for (const family of ["IPv4", "IPv6"] as const) {
      const ipt = await probeIptables(d.exec, d.log, family, backend);
      if (ipt === undefined) continue;
      families.push(
        await newProxier(d, family, d.exec, ipt, {
          conntrack: new ConntrackRunner({ exec: d.exec, family }),
          healthServer: d.healthServer,
          nodeIPs,
        }),
      );
    }
    if (families.length === 0) {
      throw new ModeUnavailableError("ipvs mode needs a working iptables; try --proxy-mode=userspace");
    }
    d.log.info("Using IPVS", { scheduler: d.config.ipvs.scheduler });
    return familyProvider(families);
  },

  async render(d, dryRun) {
    const families = await Promise.all(
      (["IPv4", "IPv6"] as const).map((family) =>
        newProxier(d, family, dryRun, new IptablesRunner({ exec: dryRun, family }), renderNodeAddresses(d))
      ),
    );
    return familyRenderer(families, (p) => {
      const tool = p.family === "IPv4" ? "iptables-restore" : "ip6tables-restore";
      return `# ipset restore -exist input (${p.family})\n${dryRun.lastInput("ipset") ?? ""}` +
        `# ${tool} --noflush input\n${dryRun.lastInput(tool) ?? ""}` +
        `# ipvsadm -R input (${p.family})\n${dryRun.lastInput("ipvsadm") ?? ""}`;
    });
  },

  trace: async (q, d) => (await import("./trace.ts")).traceIpvsMode(q, d),

  async recognizes(source) {
    if ("text" in source) return /^# ipvsadm -R input/m.test(source.text);
    const r = await source.exec.run("ip", { args: ["-o", "link", "show", "dev", KUBE_IPVS_INTERFACE] });
    return r.code === 0;
  },

  sharesKubeChains: true,

  async drain(exec, nodeIPs) {
    return (await import("./drain.ts")).ipvsDrain(exec, nodeIPs);
  },

  cleanup(exec, family, opts) {
    return cleanupIpvs(
      exec,
      family,
      opts?.everything ?? true,
      opts?.keepDatapath ?? false,
      opts?.interfaceIPs,
    );
  },
};
