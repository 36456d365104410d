/**
 * What the iptables-rule modes (iptables, ipvs, userspace portals) share about their chains: the
 * jumps from the built-in chains into ours (how they are written, found missing, removed) and the
 * removal of our chains on cleanup, written once.
 * @module
 */
import type { Chain, IPTables, Table } from "../../iptables/iptables.ts";
import { linesStartingWith, splitArgs } from "../../iptables/rule_args.ts";

/** A jump from a built-in chain (PREROUTING, INPUT...) into one of ours, inserted at its top. */
export interface BuiltinJump {
  readonly table: Table;
  readonly from: Chain;
  readonly to: Chain;
  readonly comment: string;
  /** Matches before the comment (`-m conntrack --ctstate NEW`); default none. */
  readonly extra?: readonly string[];
}

/** Returns the arguments of a jump rule (for ensureRule/deleteRule). */
export function jumpRuleArgs(j: BuiltinJump): string[] {
  return [
    ...j.extra ?? [],
    ...(j.comment === "" ? [] : ["-m", "comment", "--comment", j.comment]),
    "-j",
    j.to,
  ];
}

/** Returns the restore line that inserts jump `j` at the top of its built-in chain. */
export function jumpRuleLine(j: BuiltinJump): string {
  return `-I ${j.from} ${jumpRuleArgs(j).map((a) => a.includes(" ") ? `"${a}"` : a).join(" ")}`;
}

/**
 * Returns the jumps of `jumps` that `saved` (iptables-save output of their table) lacks. A rule
 * matches when it has the same chain and the same arguments in any order, as iptables-save may
 * order matches differently than they were given.
 */
export function missingJumps<J extends BuiltinJump>(jumps: readonly J[], saved: string): J[] {
  const key = (chain: string, args: readonly string[]) => `${chain} ${[...args].sort().join("\u0000")}`;
  const present = new Set<string>();
  for (const from of new Set(jumps.map((j) => j.from))) {
    for (const line of linesStartingWith(saved, `-A ${from} `)) {
      const [, chain, ...args] = splitArgs(line);
      present.add(key(chain, args));
    }
  }
  return jumps.filter((j) => !present.has(key(j.from, jumpRuleArgs(j))));
}

/** Returns the chains `saved` (iptables-save output of one table) declares. */
export function declaredChains(saved: string): Chain[] {
  return linesStartingWith(saved, ":").map((l) => l.slice(1, l.indexOf(" ")));
}

/** Which chains a mode owns, for {@linkcode removeOwnChains}. */
export interface ChainOwnership {
  /** The mode's jumps from the built-in chains. */
  readonly jumps: readonly BuiltinJump[];
  /** The mode's chains (names other modes may share included). */
  mine(table: Table, chain: Chain): boolean;
  /** Chains only this mode creates: where one exists in a table, this mode ran there. */
  onlyMine(table: Table, chain: Chain): boolean;
  /**
   * The names `onlyMine` accepts, when they can be listed: a start (which keeps a table holding
   * none) asks for these alone before it reads a whole table, megabytes when another mode runs.
   */
  readonly onlyMineNames?: readonly Chain[];
}

/**
 * Removes a mode's jumps and chains from nat and filter. Unless `everything`, a table is left
 * alone when it holds no chain only this mode creates (the names modes share, KUBE-SERVICES,
 * KUBE-MARK-MASQ..., must survive for a mode that runs). A chain of ours that a rule outside our
 * chains still jumps to (another mode's, kubelet's) stays for its owner. The chains go in one
 * atomic restore per table (flushed first: they reference each other). A table the backend does
 * not hold is not named to it (that would create it). Running it twice is fine. Returns how many
 * chains went, and the tables the backend held when it had to look (so a caller asks no second
 * time).
 */
export async function removeOwnChains(
  ipt: IPTables,
  own: ChainOwnership,
  everything: boolean,
): Promise<{ readonly held: ReadonlySet<Table> | undefined; readonly removed: number }> {
  let held: ReadonlySet<Table> | undefined;
  let removed = 0;
  for (const table of ["nat", "filter"] as const) {
    const names = own.onlyMineNames;
    if (!everything && names !== undefined && (await ipt.existingChains(table, names)).length === 0) continue;
    held ??= await ipt.tables();
    if (!held.has(table)) continue;
    let saved = await ipt.save(table);
    if (!everything && !declaredChains(saved).some((c) => own.onlyMine(table, c))) continue;
    // The jumps from the built-in chains go first: a chain cannot be deleted while one points at it.
    const jumps = own.jumps.filter((j) => j.table === table);
    const absent = new Set(missingJumps(jumps, saved));
    const present = jumps.filter((j) => !absent.has(j));
    for (const j of present) await ipt.deleteRule(table, j.from, jumpRuleArgs(j));
    if (present.length > 0) saved = await ipt.save(table);
    const mine = declaredChains(saved).filter((c) => own.mine(table, c));
    const usedElsewhere = new Set(
      linesStartingWith(saved, "-A ").filter((l) => !mine.includes(l.split(" ")[1]))
        .map((l) => / -[jg] (\S+)/.exec(l)?.[1]),
    );
    const ours = mine.filter((c) => !usedElsewhere.has(c));
    if (ours.length === 0) continue;
    const lines = [
      `*${table}`,
      ...ours.map((c) => `:${c} - [0:0]`),
      ...ours.map((c) => `-X ${c}`),
      "COMMIT",
      "",
    ];
    await ipt.restoreAll(lines.join("\n"), { flush: false, counters: false });
    removed += ours.length;
  }
  return { held, removed };
}
