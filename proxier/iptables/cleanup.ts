/**
 * `--cleanup` (and another mode's start) for the iptables mode: every chain and jump of kube-proxy's
 * iptables mode, ours or upstream's, on one backend.
 * @module
 */
import type { Chain, IPTables } from "../../iptables/iptables.ts";
import { type ChainOwnership, removeOwnChains } from "../_common/iptables_chains.ts";
import {
  JUMP_CHAINS,
  KUBE_EXTERNAL_SERVICES,
  KUBE_FIREWALL,
  KUBE_FORWARD,
  KUBE_MARK_MASQ,
  KUBE_NODEPORTS,
  KUBE_POSTROUTING,
  KUBE_PROXY_CANARY,
  KUBE_PROXY_DENO_SYNC,
  KUBE_PROXY_FIREWALL,
  KUBE_SERVICES,
  SERVICE_CHAIN,
} from "./rules.ts";

/**
 * Removes every chain and rule kube-proxy (and kube-proxy-deno) creates in iptables mode from one
 * family; returns how many nat and filter chains went. Running it again finds nothing to do.
 */
export async function cleanupIptables(ipt: IPTables, everything = true): Promise<number> {
  const { held, removed } = await removeOwnChains(ipt, IPTABLES_CHAINS, everything);
  if ((held ?? await ipt.tables()).has("mangle")) await ipt.deleteChain("mangle", KUBE_PROXY_CANARY);
  return removed;
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
  KUBE_PROXY_DENO_SYNC,
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
  KUBE_PROXY_DENO_SYNC,
  KUBE_NODEPORTS,
  KUBE_EXTERNAL_SERVICES,
  KUBE_PROXY_CANARY,
]);

/** Chains kubelet has created too (older versions). */
const SHARED_CHAINS: ReadonlySet<Chain> = new Set([KUBE_MARK_MASQ, KUBE_FIREWALL]);
