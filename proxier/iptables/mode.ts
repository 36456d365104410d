/**
 * The iptables mode as the program sees it: one proxier per family that has a working iptables,
 * `render` on a dry run, and `--cleanup`.
 * @module
 */
import { ConntrackRunner } from "../../iptables/conntrack.ts";
import { type Chain, type IPTables, IptablesRunner } from "../../iptables/iptables.ts";
import { ExecError } from "../../iptables/executor.ts";
import { type Nfacct, NfacctRunner } from "../../iptables/nfacct.ts";
import { ensureSysctl, ROUTE_LOCALNET, type Sysctl, SysctlRunner } from "../../iptables/sysctl.ts";
import { FULL_SYNC_PERIOD_MS } from "../proxier_options.ts";
import { ModeUnavailableError } from "../runtime/errors.ts";
import {
  familyProvider,
  familyRenderer,
  type ModeDeps,
  proxierOptions,
  type ProxyModeDefinition,
  removedText,
  renderNodeAddresses,
} from "../mode_definition.ts";
import { onEveryIptablesBackend, probeIptables, probeIptablesBackend } from "../_common/iptables_backend.ts";
import { CONNTRACK_NEED } from "../conntrack/reconciler.ts";
import type { Logger } from "../runtime/logger.ts";
import type { IPFamily } from "../model/types.ts";
import { oneWayPolicy } from "../scheduler_policy.ts";
import { kernelTCPLiberal } from "../conntrack/sysctls.ts";
import { cleanupIptables } from "./cleanup.ts";
import { CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED, nfacctMetrics } from "./metrics.ts";
import type { IptablesProxier, IptablesProxierOptions } from "./proxier.ts";

/** iptables balances at random whatever a Service's annotation asks. */
const SCHEDULERS = oneWayPolicy("iptables", "random");

/** Builds one family's iptables proxier from the program's configuration (loading its code). */
async function newProxier(
  d: ModeDeps,
  family: IPFamily,
  iptables: IPTables,
  extra: Pick<
    IptablesProxierOptions,
    "conntrack" | "healthServer" | "nodeIPs" | "nodeIPsFromNode" | "conntrackTCPLiberal" | "nfacctCounters"
  >,
): Promise<IptablesProxier> {
  const c = d.config;
  const { IptablesProxier } = await import("./proxier.ts");
  return new IptablesProxier({
    ...proxierOptions(d, family, SCHEDULERS),
    fullSyncPeriodMs: FULL_SYNC_PERIOD_MS,
    iptables,
    masqueradeAll: c.masqueradeAll,
    masqueradeBit: c.masqueradeBit,
    localhostNodePorts: c.localhostNodePorts,
    conntrackTCPLiberal: c.conntrack.tcpBeLiberal,
    ...extra,
  });
}

/** The iptables mode (upstream's default). */
export const iptablesMode: ProxyModeDefinition = {
  name: "iptables",
  traits: {
    carrier: "kernel",
    enforcesSourceRanges: true,
    externalLocal: "short-circuit",
    rejectsUnservedPorts: "none",
    dropsUnallocatedServiceIPs: false,
    dropsInvalid: true,
    hairpin: "every-endpoint",
  },
  migrationAdvice: { localhostNodePorts: "include `localhost` in `--nodeport-addresses`" },
  schedulers: () => SCHEDULERS,
  tools: [
    {
      tool: "iptables-restore",
      required: true,
      without: "writes the rules (Debian/Ubuntu package iptables)",
    },
    { tool: "iptables-save", required: true, without: "reads the rules (Debian/Ubuntu package iptables)" },
    CONNTRACK_NEED,
    {
      tool: "nfacct",
      required: false,
      without: "kubeproxy_iptables_ct_state_invalid_dropped_packets_total and " +
        "kubeproxy_iptables_localhost_nodeports_accepted_packets_total are absent (Debian/Ubuntu package nfacct)",
    },
    {
      tool: "sysctl",
      required: false,
      without: "route_localnet cannot be set: NodePorts on 127.0.0.1 answer only if " +
        "net.ipv4.conf.all.route_localnet is already 1 (Debian/Ubuntu package procps)",
      when: (c) => c.localhostNodePorts,
    },
  ],

  async setup(d) {
    if (d.config.localhostNodePorts) await enableRouteLocalnet(new SysctlRunner({ exec: d.exec }), d.log);
  },

  async create(d) {
    const nodeIPs = d.interfaceIPs();
    const conntrackTCPLiberal = await kernelTCPLiberal(new SysctlRunner({ exec: d.exec }), d.log);
    const backend = await probeIptablesBackend(d.exec, d.log, d.config.iptablesBackend);
    const families: IptablesProxier[] = [];
    const runners = await Promise.all(
      (["IPv4", "IPv6"] as const).map((family) => probeIptables(d.exec, d.log, family, backend)),
    );
    const nfacct = new NfacctRunner({ exec: d.exec });
    const nfacctCounters = await usableNfacctCounters(nfacct, runners.find((r) => r !== undefined), d.log);
    nfacctMetrics(d.metrics.registry, nfacct, nfacctCounters);
    for (const ipt of runners) {
      if (ipt === undefined) continue;
      families.push(
        await newProxier(d, ipt.family, ipt, {
          conntrack: new ConntrackRunner({ exec: d.exec, family: ipt.family }),
          healthServer: d.healthServer,
          nodeIPs,
          conntrackTCPLiberal,
          nfacctCounters,
        }),
      );
    }
    if (families.length === 0) {
      throw new ModeUnavailableError(
        "iptables mode needs root and a working iptables; try --proxy-mode=userspace",
      );
    }
    // Our chains in the other backend (a previous run chose it) would act on packets too.
    const other = backend === "nft" ? "legacy" : backend === "legacy" ? "nft" : undefined;
    return familyProvider(families, async () => {
      for (const p of other === undefined ? [] : families) {
        await cleanupIptables(new IptablesRunner({ exec: d.exec, family: p.family, backend: other }))
          .catch((e) =>
            d.log.warn("Cannot remove our rules from the other iptables backend", {
              backend: other,
              family: p.family,
              error: (e as Error).message,
            })
          );
      }
    });
  },

  async render(d, dryRun) {
    const families = await Promise.all(
      (["IPv4", "IPv6"] as const).map((family) =>
        newProxier(d, family, new IptablesRunner({ exec: dryRun, family }), renderNodeAddresses(d))
      ),
    );
    return familyRenderer(families, (p) => {
      const tool = p.family === "IPv4" ? "iptables-restore" : "ip6tables-restore";
      return `# ${tool} --noflush input\n${dryRun.lastInput(tool) ?? ""}`;
    });
  },

  trace: async (q, d) => (await import("../trace/iptables_trace.ts")).traceIptables(q, d),

  recognizes: async (source) =>
    (await import("../trace/iptables_trace.ts")).natDeclares(source, "KUBE-SERVICES"),

  sharesKubeChains: true,

  async cleanup(exec, family, opts) {
    const chains = await onEveryIptablesBackend(
      exec,
      family,
      (ipt) => cleanupIptables(ipt, opts?.everything ?? true),
    );
    return removedText([[chains.reduce((a, b) => a + b, 0), "chain"]]);
  },
};

/** NodePorts on 127.0.0.1 need the kernel to route localnet traffic, as upstream sets. */
async function enableRouteLocalnet(sysctl: Sysctl, log: Logger): Promise<void> {
  try {
    if (await ensureSysctl(sysctl, ROUTE_LOCALNET, "1")) {
      log.info("Enabled route_localnet", { key: ROUTE_LOCALNET });
    }
  } catch (e) {
    log.warn("Cannot enable route_localnet; NodePorts on 127.0.0.1 will not work", {
      error: (e as Error).message,
    });
  }
}

/** A chain of ours that lives only inside the restore that checks `-m nfacct`. */
const NFACCT_PROBE: Chain = "KUBE-PROXY-NFACCT-PROBE";

/**
 * Returns upstream's nfacct counters the rules may feed: each created (kept when it exists), and
 * only when this kernel's iptables can match `-m nfacct` (a kernel without xt_nfacct refuses the
 * whole restore that holds such a rule, so a chain of ours is written and deleted in one restore
 * first). Without the nfacct tool, or on refusal: none, and the two metrics are absent.
 */
export async function usableNfacctCounters(
  nfacct: Nfacct,
  ipt: IPTables | undefined,
  log: Logger,
): Promise<Set<string>> {
  const usable = new Set<string>();
  for (const name of [CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED]) {
    try {
      await nfacct.ensure(name);
      usable.add(name);
    } catch (e) {
      // Not installed: the tool check at start said so already.
      if (!(e instanceof ExecError && e.code === -1)) {
        log.warn("Cannot create an nfacct counter; its metric is absent", {
          counter: name,
          error: (e as Error).message,
        });
      }
    }
  }
  if (usable.size === 0 || ipt === undefined) return usable;
  const probe = `*filter\n:${NFACCT_PROBE} - [0:0]\n-A ${NFACCT_PROBE} -m nfacct --nfacct-name ${
    [...usable][0]
  } -j RETURN\n-F ${NFACCT_PROBE}\n-X ${NFACCT_PROBE}\nCOMMIT\n`;
  try {
    await ipt.restoreAll(probe, { flush: false, counters: false });
  } catch (e) {
    log.warn("This kernel's iptables cannot match -m nfacct (no xt_nfacct); the nfacct metrics are absent", {
      error: (e as Error).message,
    });
    return new Set();
  }
  return usable;
}
