/**
 * The nftables mode as the program sees it: checks at start (root, nft, its version, the layout
 * accepted by this kernel), one proxier per family that works, `render` on a dry run, `--cleanup`.
 * @module
 */
import { ConntrackRunner } from "../../iptables/conntrack.ts";
import type { Executor } from "../../iptables/executor.ts";
import { type NFTables, nftFamily, NftRunner, type NftVersion, versionAtLeast } from "../../iptables/nft.ts";
import { FULL_SYNC_PERIOD_MS } from "../proxier_options.ts";
import { ModeUnavailableError } from "../runtime/errors.ts";
import { CONNTRACK_NEED } from "../conntrack/reconciler.ts";
import {
  familyProvider,
  familyRenderer,
  type ModeDeps,
  proxierOptions,
  type ProxyModeDefinition,
  renderNodeAddresses,
} from "../mode_definition.ts";
import type { IPFamily } from "../model/types.ts";
import { nftablesSchedulers } from "./schedulers.ts";
import { unboundListen } from "../socket_proxy/listen.ts";
import { fixedLayout, TABLE } from "./layout.ts";
import { cleanupNftables } from "./cleanup.ts";
import { addAffinity } from "./affinity.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import { masqueradeMark } from "../_common/masquerade.ts";
import type { NftablesProxier, NftablesProxierOptions } from "./proxier.ts";
import { KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS } from "../options/feature_gates.ts";
import { NodePortAddresses } from "../model/nodeport_addresses.ts";

/** The oldest nft the layout is known to need features of (upstream's minimum too). */
export const MIN_NFT_VERSION: readonly [number, number, number] = [1, 0, 1];

/** Builds one family's nftables proxier from the program's configuration (loading its code). */
async function newProxier(
  d: ModeDeps,
  family: IPFamily,
  nft: NFTables,
  extra: Pick<
    NftablesProxierOptions,
    | "conntrack"
    | "healthServer"
    | "nodeIPs"
    | "nodeIPsFromNode"
    | "affinitySupported"
    | "localhostNodePorts"
    | "portNotice"
  >,
): Promise<NftablesProxier> {
  const c = d.config;
  const { NftablesProxier } = await import("./proxier.ts");
  return new NftablesProxier({
    ...proxierOptions(d, family, nftablesMode.schedulers(c)),
    fullSyncPeriodMs: FULL_SYNC_PERIOD_MS,
    nft,
    masqueradeAll: c.masqueradeAll,
    masqueradeBit: c.nftablesMasqueradeBit,
    maglevTableSize: c.maglevTableSize,
    maglevSeed: c.maglevSeed,
    ...extra,
  });
}

/** A transaction that builds the whole fixed layout from scratch (checked with `nft -c`, never applied). */
export function probeScript(family: IPFamily, withAffinity: boolean): string {
  const tx = new NftTransaction(family, TABLE).deleteTable();
  fixedLayout(tx, { family, masqueradeAll: false, mark: masqueradeMark(14, 8), local: undefined });
  if (withAffinity) addAffinity(tx, 10800);
  return tx.text();
}

/**
 * The nft versions known to abort (an assertion in `netlink_linearize.c`, SIGABRT) on the IPv6
 * affinity map's update rule, even under `nft -c`: the start does not ask them, since each abort is
 * a crash a node's crash handler (systemd-coredump, apport) records at every start. `mode_test.ts`
 * holds each entry to the nft of the machine the tests run on when it is that version.
 */
export const IPV6_AFFINITY_ABORTS: readonly (readonly [number, number, number])[] = [[1, 0, 6]];

/** Returns whether `version` is one of {@linkcode IPV6_AFFINITY_ABORTS}. */
export function abortsOnIPv6Affinity(version: NftVersion): boolean {
  return IPV6_AFFINITY_ABORTS.some(([a, b, c]) =>
    version.major === a && version.minor === b && version.patch === c
  );
}

/**
 * Checks the fixed layout of `family` with `nft -c`, with the affinity maps and then without (only
 * without when this `version` is known to abort on them): returns what nft rejected (`rejected`:
 * the layout itself; `affinityRejected`: only with affinity).
 */
async function probeFamily(
  nft: NftRunner,
  family: IPFamily,
  version: NftVersion,
): Promise<{ rejected?: Error; affinityRejected?: Error }> {
  let affinityRejected: Error;
  if (family === "IPv6" && abortsOnIPv6Affinity(version)) {
    affinityRejected = new Error(`${version.text} is known to abort on the IPv6 affinity map's update rule`);
  } else {
    try {
      await nft.check(probeScript(family, true));
      return {};
    } catch (e) {
      affinityRejected = e as Error;
    }
  }
  try {
    await nft.check(probeScript(family, false));
    return { affinityRejected };
  } catch (e) {
    return { rejected: e as Error };
  }
}

/** The Event reason of a Service whose ClientIP affinity this node's nft cannot program. */
export const AFFINITY_NOT_PROGRAMMED = "AffinityNotProgrammed";

/**
 * Returns what a proxier of `family` says of a Service with ClientIP affinity when this nft (`version`)
 * cannot program it: nft 1.0.6 aborts on the IPv6 affinity map's update rule (its key and value
 * take more registers than it allocates); nft 1.1.3 takes it.
 */
export function affinityNotice(family: IPFamily, version: string): NftablesProxierOptions["portNotice"] {
  return (port) =>
    port.stickyMaxAgeSeconds === 0 ? undefined : {
      reason: AFFINITY_NOT_PROGRAMMED,
      msg: `sessionAffinity ClientIP is not programmed for ${family}: ${version} aborts on the affinity ` +
        "map's update rule (nft 1.1.3 takes it; this program's image has it); new connections are " +
        "balanced without affinity",
    };
}

/**
 * Returns the families whose loopback NodePorts are served (by a socket proxy): as upstream 1.37,
 * the feature gate on and `--nodeport-addresses` naming that family's loopback address (`localhost`,
 * or a CIDR holding 127.0.0.1 / ::1; `all` does not ask for it). Says once why not when only one of
 * the two is given.
 */
function localhostFamilies(d: ModeDeps): ReadonlySet<IPFamily> {
  const gate = d.config.features.enabled(KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS);
  const asked = (["IPv4", "IPv6"] as const).filter((f) =>
    new NodePortAddresses(f, d.config.nodePortAddresses, undefined).explicitLoopback
  );
  if (asked.length > 0 && !gate) {
    d.log.warn(
      `--nodeport-addresses names ${
        asked.join(" and ")
      } loopback, but nftables mode serves NodePorts there ` +
        `only with --feature-gates=${KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS}=true (upstream 1.37, alpha)`,
    );
  } else if (gate && asked.length === 0) {
    d.log.info(
      `${KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS} is on, but --nodeport-addresses names no loopback address ` +
        "(add localhost): NodePorts are not served on 127.0.0.1 or ::1",
    );
  }
  return new Set(gate ? asked : []);
}

/** The nftables mode. */
export const nftablesMode: ProxyModeDefinition = {
  name: "nftables",
  traits: {
    carrier: "kernel",
    enforcesSourceRanges: true,
    externalLocal: "short-circuit-node-drops",
    rejectsUnservedPorts: "cluster-ips",
    dropsUnallocatedServiceIPs: true,
    dropsInvalid: false,
    hairpin: "local-endpoints",
  },
  migrationAdvice: {
    localhostNodePorts: "add `--nodeport-addresses=primary,localhost` with " +
      "`--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true` (a socket proxy then serves 127.0.0.1 and ::1)",
    scheduler:
      "annotate the Service `kube-router.io/service.scheduler` with rr, sh, dh or mh (nftables honours " +
      "them); the connection-counting schedulers (lc, wlc...) exist only in IPVS",
  },
  schedulers: (c) => nftablesSchedulers(c.maglevTableSize),
  tools: [
    { tool: "nft", required: true, without: "writes the rules (Debian/Ubuntu package nftables)" },
    CONNTRACK_NEED,
  ],

  async create(d) {
    if (Deno.uid() !== 0) {
      throw new ModeUnavailableError("nftables mode needs root; try --proxy-mode=userspace");
    }
    const v4 = new NftRunner({ exec: d.exec, family: "IPv4" });
    let version;
    try {
      version = await v4.version();
    } catch (e) {
      throw new ModeUnavailableError(
        `nftables mode needs the nft tool (Debian/Ubuntu package nftables): ${
          (e as Error).message
        }; try --proxy-mode=iptables`,
        { cause: e },
      );
    }
    if (!versionAtLeast(version, MIN_NFT_VERSION)) {
      throw new ModeUnavailableError(
        `nftables mode needs nft ${
          MIN_NFT_VERSION.join(".")
        } or newer; found "${version.text}"; try --proxy-mode=iptables`,
      );
    }
    d.log.info("Using nft", { version: version.text });
    const nodeIPs = d.interfaceIPs();
    const families: NftablesProxier[] = [];
    const localhost = localhostFamilies(d);
    // The families' probes run at once: the lists wait for them.
    const probes = await Promise.all((["IPv4", "IPv6"] as const).map(async (family) => {
      const nft = new NftRunner({ exec: d.exec, family });
      return { family, nft, probe: await probeFamily(nft, family, version) };
    }));
    for (const { family, nft, probe } of probes) {
      if (probe.rejected !== undefined) {
        const e = probe.rejected;
        if (family === "IPv4") {
          throw new ModeUnavailableError(
            `nftables mode: this kernel or nft rejects the layout: ${e.message}; try --proxy-mode=iptables`,
            { cause: e },
          );
        }
        d.log.warn("IPv6 nftables layout rejected; serving IPv4 only", { error: e.message });
        continue;
      }
      const affinitySupported = probe.affinityRejected === undefined;
      if (!affinitySupported) {
        // Said once a Service needs it (a Warning and an Event on it): on a node without such a
        // Service this nft's limit changes nothing.
        d.log.debug("This nft cannot program ClientIP affinity for this family", {
          family,
          error: probe.affinityRejected!.message,
        });
      }
      families.push(
        await newProxier(d, family, nft, {
          conntrack: new ConntrackRunner({ exec: d.exec, family }),
          healthServer: d.healthServer,
          nodeIPs,
          affinitySupported,
          portNotice: affinitySupported ? undefined : affinityNotice(family, version.text),
          localhostNodePorts: localhost.has(family)
            ? {
              udpIdleTimeoutMs: d.config.udpIdleTimeoutMs,
              tcpLimits: {
                idleTimeoutMs: d.config.tcpIdleTimeoutMs,
                writeTimeoutMs: d.config.tcpWriteTimeoutMs,
              },
            }
            : undefined,
        }),
      );
    }
    return familyProvider(families, undefined, {
      close: () => families.forEach((p) => p.close()),
      onStop: "localhost NodePort listeners close (connections in flight finish)",
      answer: (c, family) => families.find((p) => p.family === family)?.localhostAnswer(c),
    });
  },

  async render(d, dryRun) {
    const localhost = localhostFamilies(d);
    const families = await Promise.all(
      (["IPv4", "IPv6"] as const).map((family) =>
        newProxier(d, family, new NftRunner({ exec: dryRun, family }), {
          ...renderNodeAddresses(d),
          affinitySupported: true,
          // The loopback NodePorts' socket proxy as the rules see it, listening on nothing.
          localhostNodePorts: localhost.has(family)
            ? { udpIdleTimeoutMs: d.config.udpIdleTimeoutMs, listen: unboundListen }
            : undefined,
        })
      ),
    );
    // Each family's sync, in order: a new Maglev table is a transaction of its own before the sync's.
    let seen = 0;
    return familyRenderer(families, (p) => {
      const inputs = dryRun.commands.slice(seen).filter((c) => c.cmd === "nft" && c.stdin !== undefined);
      seen = dryRun.commands.length;
      return inputs.map((c) => `# nft -f - input (${nftFamily(p.family)})\n${c.stdin}`).join("");
    }, { answer: (c, family) => families.find((p) => p.family === family)?.localhostAnswer(c) });
  },

  trace: async (q, d) => (await import("./trace.ts")).traceNftables(q, d),

  async recognizes(source) {
    if ("text" in source) return (await import("./trace.ts")).isNftText(source.text);
    const chains = await new NftRunner({ exec: source.exec, family: source.family }).listChains(TABLE)
      .catch(() => undefined);
    return chains !== undefined;
  },

  cleanup: (exec: Executor, family: IPFamily) => cleanupNftables(exec, family),
};
