/**
 * What the nftables mode makes of kube-router's per-Service scheduler annotations
 * (`kube-router.io/service.scheduler`, `kube-router.io/service.schedflags`): it honours those it can
 * compute from the packet alone; the others need the connection counts only IPVS keeps and fall
 * back to the default, said once per Service.
 * @module
 */
import type { SchedulerPolicy } from "../scheduler_policy.ts";

/** How the nftables mode chooses an endpoint for a new connection. */
export type NftAlgorithm =
  /** `numgen random mod N`: upstream's choice, and the default. */
  | "random"
  /** `numgen inc mod N`: round robin, per node. */
  | "rr"
  /** `jhash` of the source address (and port): the same client, the same endpoint, on every node. */
  | "sh"
  /** `jhash` of the destination address: every connection to one service address, one endpoint. */
  | "dh"
  /** Maglev consistent hashing of the source address (and port) (`maglev.ts`). */
  | "mh";

/** The nftables mode's choice for one Service. */
export interface NftScheduler {
  readonly algorithm: NftAlgorithm;
  /** sh and mh: the source port is hashed too (the 5-tuple; the 3-tuple without it). */
  readonly sourcePort: boolean;
}

/** The default: upstream's random choice. */
export const RANDOM: NftScheduler = { algorithm: "random", sourcePort: false };

/** IPVS schedulers that need per-connection state the kernel's IPVS alone keeps. */
const STATEFUL = new Set(["lc", "wlc", "sed", "nq", "lblc", "lblcr"]);

/**
 * Returns the nftables mode's choice for a Service's annotations: `rr` and `wrr` (every endpoint
 * weighs 1) round robin; `sh` hashes the source address, and its port with `flag-2` (ipvs'
 * sh-port); `dh` the destination address; `mh` is Maglev over the source address and port, as the
 * ipvs mode sets mh-port when no flags are given, and over the source address alone when flags
 * without `flag-2` are. Anything else (the stateful schedulers) is the default.
 */
export function nftablesScheduler(
  scheduler: string | undefined,
  flags: readonly string[] | undefined,
): NftScheduler {
  const port = flags?.includes("flag-2") === true;
  switch (scheduler) {
    case "rr":
    case "wrr":
      return { algorithm: "rr", sourcePort: false };
    case "sh":
      return { algorithm: "sh", sourcePort: port };
    case "dh":
      return { algorithm: "dh", sourcePort: false };
    case "mh":
      return { algorithm: "mh", sourcePort: flags === undefined || port };
    default:
      return RANDOM;
  }
}

/**
 * Returns how the nftables mode balances a Service with `s`, in a few words for `explain`
 * (`tableSize`: Maglev's M).
 */
export function describeNftScheduler(s: NftScheduler, tableSize: number): string {
  const source = s.sourcePort ? "source address and port" : "source address";
  switch (s.algorithm) {
    case "random":
      return "random (the default)";
    case "rr":
      return "rr: round robin on this node";
    case "sh":
      return `sh: hash of the ${source}, the same endpoint on every node`;
    case "dh":
      return "dh: hash of the destination address";
    case "mh":
      return `mh: Maglev, ${tableSize} slots, hash of the ${source}, the same endpoint on every node`;
  }
}

/** Returns the nftables mode's scheduler policy (`tableSize`: Maglev's M, for `explain`). */
export function nftablesSchedulers(tableSize: number): SchedulerPolicy {
  return {
    notice: (scheduler) =>
      STATEFUL.has(scheduler)
        ? `kube-router.io/service.scheduler "${scheduler}" needs the connection counts only IPVS keeps; ` +
          "nftables mode balances this Service at random (the default)"
        : undefined,
    describe(svc) {
      const described = describeNftScheduler(nftablesScheduler(svc.scheduler, svc.schedFlags), tableSize);
      return svc.scheduler !== undefined && STATEFUL.has(svc.scheduler)
        ? `${described}; ${svc.scheduler} is not honoured here`
        : described;
    },
  };
}
