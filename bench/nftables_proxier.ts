/**
 * The nftables proxier the benchmarks (and the tests that borrow their objects) build: upstream's
 * defaults on the file source, node `node-a` at 192.168.0.2, cluster CIDR 10.0.0.0/8, IPv4.
 * @module
 */
import type { Executor } from "../iptables/executor.ts";
import { type NFTables, NftRunner } from "../iptables/nft.ts";
import { newModeDeps, proxierOptions } from "../proxier/mode_definition.ts";
import { nftablesMode } from "../proxier/nftables/mode.ts";
import { NftablesProxier } from "../proxier/nftables/proxier.ts";
import { realClock } from "../proxier/runtime/clock.ts";
import { nullLogger } from "../proxier/runtime/logger.ts";
import { benchConfig } from "./objects.ts";

/**
 * Returns a proxier whose kernel tools run on `exec` (nft through `o.nft` when given, else an
 * `NftRunner` on `exec`); `o.node` names the node, `o.maglevTableSize` sets Maglev's M, `o.freshChunkStatements` the parts
 * of a new table's load. Starts nothing.
 */
export function benchNftablesProxier(
  exec: Executor,
  o: { node?: string; nft?: NFTables; maglevTableSize?: number; freshChunkStatements?: number } = {},
): NftablesProxier {
  const config = benchConfig({ clusterCIDRs: ["10.0.0.0/8"] });
  const deps = newModeDeps(config, { nodeName: o.node ?? "node-a", log: nullLogger, clock: realClock, exec });
  return new NftablesProxier({
    ...proxierOptions(deps, "IPv4", nftablesMode.schedulers(deps.config)),
    fullSyncPeriodMs: 3_600_000,
    nft: o.nft ?? new NftRunner({ exec, family: "IPv4" }),
    masqueradeAll: false,
    masqueradeBit: 14,
    nodePortAddresses: [],
    nodeIPs: ["192.168.0.2"],
    affinitySupported: true,
    ...(o.maglevTableSize === undefined ? {} : { maglevTableSize: o.maglevTableSize }),
    freshChunkStatements: o.freshChunkStatements,
  });
}
