/**
 * The nftables proxier the benchmarks (and the tests that borrow their objects) build: upstream's
 * defaults on the file source, node `node-a` at 192.168.0.2, cluster CIDR 10.0.0.0/8, IPv4.
 * @module
 */
import type { Executor } from "../iptables/executor.ts";
import { type NFTables, NftRunner } from "../iptables/nft.ts";
import { newModeDeps, proxierOptions } from "../proxier/mode_definition.ts";
import { nftablesMode } from "../proxier/nftables/mode.ts";
import { NftablesProxier, type NftablesProxierOptions } from "../proxier/nftables/proxier.ts";
import { realClock } from "../proxier/runtime/clock.ts";
import { nullLogger } from "../proxier/runtime/logger.ts";
import { benchConfig } from "./objects.ts";

/** What {@linkcode benchNftablesProxier} may be told; everything else is upstream's defaults. */
export interface BenchNftablesOptions {
  /** The node's name (default `node-a`). */
  readonly node?: string;
  /** The family's nft (default an `NftRunner` on the executor). */
  readonly nft?: NFTables;
  /** Maglev's M. */
  readonly maglevTableSize?: number;
  /** Statements per part of a new table's load. */
  readonly freshChunkStatements?: number;
}

/**
 * Returns the options of the bench's proxier: its kernel tools run on `exec` (nft through `o.nft`
 * when given, else an `NftRunner` on `exec`).
 */
export function benchNftablesOptions(exec: Executor, o: BenchNftablesOptions = {}): NftablesProxierOptions {
  const config = benchConfig({ clusterCIDRs: ["10.0.0.0/8"] });
  const deps = newModeDeps(config, { nodeName: o.node ?? "node-a", log: nullLogger, clock: realClock, exec });
  return {
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
  };
}

/** Returns a proxier with {@linkcode benchNftablesOptions}. Starts nothing. */
export function benchNftablesProxier(exec: Executor, o: BenchNftablesOptions = {}): NftablesProxier {
  return new NftablesProxier(benchNftablesOptions(exec, o));
}
