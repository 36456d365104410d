/**
 * The userspace mode's `--cleanup` (and what a start of another mode removes): the portal chains
 * and the built-in chains' jumps into them, on every iptables backend that holds them. The
 * listeners are the process's own and go with it.
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import type { IPTables } from "../../iptables/iptables.ts";
import { onEveryIptablesBackend } from "../_common/iptables_backend.ts";
import { removedText } from "../mode_definition.ts";
import type { IPFamily } from "../model/types.ts";
import { jumpArgs, PORTAL_JUMPS } from "./portals.ts";

/**
 * Removes the portal chains and their jump rules; succeeds when they are already gone, names no
 * table the backend does not hold (that would create it), and on a node that has no portal chain
 * (every start of another mode asks) only asks for them, never reading the whole table.
 */
export async function cleanupUserspace(ipt: IPTables): Promise<number> {
  // A jump needs its chain: where the table declares no portal chain, there is no jump either.
  const declared = new Set(await ipt.existingChains("nat", PORTAL_JUMPS.map((j) => j.to)));
  let removed = 0;
  for (const { from, to } of PORTAL_JUMPS) {
    if (!declared.has(to)) continue;
    await ipt.deleteRule("nat", from, jumpArgs(to));
    await ipt.deleteChain("nat", to);
    removed++;
  }
  return removed;
}

/** Removes `family`'s portals on every iptables backend; returns what went, as `--cleanup` says it. */
export async function cleanupUserspaceMode(exec: Executor, family: IPFamily): Promise<string[]> {
  const chains = await onEveryIptablesBackend(exec, family, cleanupUserspace);
  return removedText([[chains.reduce((a, b) => a + b, 0), "portal chain"]]);
}
