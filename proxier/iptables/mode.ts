/**
 * The iptables mode as the program sees it: one proxier per family that has a working iptables,
 * `render` on a dry run, and `--cleanup`.
 * @module
 */
import { ConntrackRunner } from "../../iptables/conntrack.ts";
import { type Chain, type IPTables, IptablesRunner } from "../../iptables/iptables.ts";
import { ensureSysctl, ROUTE_LOCALNET, type Sysctl, SysctlRunner } from "../../iptables/sysctl.ts";
import { FULL_SYNC_PERIOD_MS } from "../base_proxier.ts";
import { ModeUnavailableError } from "../errors.ts";
import { traceIptables } from "./trace.ts";
import {
  CONNTRACK_NEED,
  onEveryIptablesBackend,
  probeIptables,
  probeIptablesBackend,
} from "../runtime/kernel_tools.ts";
import type { Logger } from "../runtime/logger.ts";
import {
  familyProvider,
  familyRenderer,
  type ModeDeps,
  proxierOptions,
  type ProxyModeDefinition,
} from "../mode_definition.ts";
import { type ChainOwnership, removeOwnChains } from "../iptables_chains.ts";
import type { IPFamily } from "../types.ts";
import { IptablesProxier, type IptablesProxierOptions } from "./proxier.ts";
import {
  JUMP_CHAINS,
  KUBE_EXTERNAL_SERVICES,
  KUBE_FIREWALL,
  KUBE_FORWARD,
  KUBE_MARK_MASQ,
  KUBE_NODEPORTS,
  KUBE_POSTROUTING,
  KUBE_PROXY_CANARY,
  KUBE_PROXY_FIREWALL,
  KUBE_SERVICES,
  SERVICE_CHAIN,
} from "./rules.ts";

/** Builds one family's iptables proxier from the program's configuration. */
function newProxier(
  d: ModeDeps,
  family: IPFamily,
  iptables: IPTables,
  extra: Pick<IptablesProxierOptions, "conntrack" | "healthServer" | "nodeIPs">,
): IptablesProxier {
  const c = d.config;
  return new IptablesProxier({
    ...proxierOptions(d, family),
    fullSyncPeriodMs: FULL_SYNC_PERIOD_MS,
    iptables,
    masqueradeAll: c.masqueradeAll,
    masqueradeBit: c.masqueradeBit,
    nodePortAddresses: c.nodePortAddresses,
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
    const backend = await probeIptablesBackend(d.exec, d.log, d.config.iptablesBackend);
    const families: IptablesProxier[] = [];
    const runners = await Promise.all(
      (["IPv4", "IPv6"] as const).map((family) => probeIptables(d.exec, d.log, family, backend)),
    );
    for (const ipt of runners) {
      if (ipt === undefined) continue;
      families.push(newProxier(d, ipt.family, ipt, {
        conntrack: new ConntrackRunner({ exec: d.exec, family: ipt.family }),
        healthServer: d.healthServer,
        nodeIPs,
      }));
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

  render(d, dryRun) {
    const families = (["IPv4", "IPv6"] as const).map((family) =>
      newProxier(d, family, new IptablesRunner({ exec: dryRun, family }), { nodeIPs: [] })
    );
    return familyRenderer(families, (p) => {
      const tool = p.family === "IPv4" ? "iptables-restore" : "ip6tables-restore";
      return `# ${tool} --noflush input\n${dryRun.lastInput(tool) ?? ""}`;
    });
  },

  trace: traceIptables,

  cleanup(exec, family, opts) {
    return onEveryIptablesBackend(exec, family, (ipt) => cleanupIptables(ipt, opts?.everything ?? true));
  },
};

/**
 * Removes every chain and rule kube-proxy (and kube-proxy-deno) creates in iptables mode from one
 * family; running it again finds nothing to do.
 */
export async function cleanupIptables(ipt: IPTables, everything = true): Promise<void> {
  await removeOwnChains(ipt, IPTABLES_CHAINS, everything);
  await ipt.deleteChain("mangle", KUBE_PROXY_CANARY);
}

/** The iptables mode's chains, for {@linkcode removeOwnChains}. */
const IPTABLES_CHAINS: ChainOwnership = {
  jumps: JUMP_CHAINS,
  mine: (_, c) => OWN_CHAINS.has(c) || SERVICE_CHAIN.test(c) || SHARED_CHAINS.has(c),
  // The ipvs mode shares some names (nat KUBE-SERVICES, KUBE-POSTROUTING...).
  onlyMine: (table, c) =>
    IPTABLES_ONLY.has(c) || SERVICE_CHAIN.test(c) || (table === "filter" && c === KUBE_SERVICES),
};

/** Chains only kube-proxy creates (besides the per-service ones). */
const OWN_CHAINS: ReadonlySet<Chain> = new Set([
  KUBE_SERVICES,
  KUBE_EXTERNAL_SERVICES,
  KUBE_NODEPORTS,
  KUBE_POSTROUTING,
  KUBE_FORWARD,
  KUBE_PROXY_FIREWALL,
  KUBE_PROXY_CANARY,
]);

/** Chains only the iptables mode creates (besides the per-service ones). */
const IPTABLES_ONLY: ReadonlySet<Chain> = new Set([
  KUBE_NODEPORTS,
  KUBE_EXTERNAL_SERVICES,
  KUBE_PROXY_CANARY,
]);

/** Chains kubelet has created too (older versions). */
const SHARED_CHAINS: ReadonlySet<Chain> = new Set([KUBE_MARK_MASQ, KUBE_FIREWALL]);

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
