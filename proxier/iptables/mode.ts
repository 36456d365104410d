/**
 * The iptables mode as the program sees it: one proxier per family that has a working iptables,
 * `render` on a dry run, and `--cleanup`.
 * @module
 */
import { ConntrackRunner } from "../../iptables/conntrack.ts";
import { type IPTables, IptablesRunner } from "../../iptables/iptables.ts";
import { ensureSysctl, ROUTE_LOCALNET, type Sysctl, SysctlRunner } from "../../iptables/sysctl.ts";
import { FULL_SYNC_PERIOD_MS } from "../base_proxier.ts";
import { ModeUnavailableError } from "../errors.ts";
import {
  familyProvider,
  familyRenderer,
  type ModeDeps,
  proxierOptions,
  type ProxyModeDefinition,
  renderNodeAddresses,
} from "../mode_definition.ts";
import {
  chooseIptablesBackend,
  CONNTRACK_NEED,
  onEveryIptablesBackend,
  probeIptables,
  probeIptablesBackend,
} from "../runtime/kernel_tools.ts";
import type { Logger } from "../runtime/logger.ts";
import type { IPFamily } from "../types.ts";
import { kernelTCPLiberal } from "../conntrack/sysctls.ts";
import { cleanupIptables } from "./cleanup.ts";
import type { IptablesProxier, IptablesProxierOptions } from "./proxier.ts";

/** Builds one family's iptables proxier from the program's configuration (loading its code). */
async function newProxier(
  d: ModeDeps,
  family: IPFamily,
  iptables: IPTables,
  extra: Pick<
    IptablesProxierOptions,
    "conntrack" | "healthServer" | "nodeIPs" | "nodeIPsFromNode" | "conntrackTCPLiberal"
  >,
): Promise<IptablesProxier> {
  const c = d.config;
  const { IptablesProxier } = await import("./proxier.ts");
  return new IptablesProxier({
    ...proxierOptions(d, family),
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
  tools: [
    {
      tool: "iptables-restore",
      required: true,
      without: "writes the rules (Debian/Ubuntu package iptables)",
    },
    { tool: "iptables-save", required: true, without: "reads the rules (Debian/Ubuntu package iptables)" },
    CONNTRACK_NEED,
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
    const nodeIPs = Deno.networkInterfaces().map((i) => i.address);
    const conntrackTCPLiberal = await kernelTCPLiberal(new SysctlRunner({ exec: d.exec }), d.log);
    const backend = await probeIptablesBackend(d.exec, d.log, d.config.iptablesBackend);
    const families: IptablesProxier[] = [];
    const runners = await Promise.all(
      (["IPv4", "IPv6"] as const).map((family) => probeIptables(d.exec, d.log, family, backend)),
    );
    for (const ipt of runners) {
      if (ipt === undefined) continue;
      families.push(
        await newProxier(d, ipt.family, ipt, {
          conntrack: new ConntrackRunner({ exec: d.exec, family: ipt.family }),
          healthServer: d.healthServer,
          nodeIPs,
          conntrackTCPLiberal,
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

  trace: async (q, d) => (await import("./trace.ts")).traceIptables(q, d),

  async recognizes(source) {
    if ("text" in source) return /^(:KUBE-SERVICES |-A KUBE-SERVICES )/m.test(source.text);
    const { backend } = await chooseIptablesBackend(source.exec, "auto");
    const saved = await new IptablesRunner({ exec: source.exec, family: source.family, backend })
      .save("nat").catch(() => "");
    return /^:KUBE-SERVICES /m.test(saved);
  },

  cleanup(exec, family, opts) {
    return onEveryIptablesBackend(exec, family, (ipt) => cleanupIptables(ipt, opts?.everything ?? true));
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
