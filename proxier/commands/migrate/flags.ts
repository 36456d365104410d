/**
 * `migrate`'s own flags, read into a {@linkcode MigrateQuery}.
 * @module
 */
import type { CommandArgs } from "../../command_definition.ts";
import { UsageError } from "../../runtime/errors.ts";
import { PROXY_MODES, type ProxyMode } from "../../options/config.ts";
import type { FlagDef } from "../../options/flag_table.ts";
import {
  commandFlag,
  nodeIPFlag,
  OUTPUT_FLAG,
  parseNodeIPs,
  parseOutput,
  RULES_FLAG,
} from "../../read_side/flags.ts";

/** What `migrate` is asked. */
export interface MigrateQuery {
  readonly to: ProxyMode;
  /** The mode programming the node now; undefined: the first whose rules are found. */
  readonly from?: ProxyMode;
  /**
   * Saved listings of the node's rules (iptables-save, ip6tables-save, nft list ruleset...) instead
   * of the live ones: one file may hold both families' listings, or `--rules` is given once each.
   */
  readonly rulesFiles: readonly string[];
  readonly nodeIPs?: readonly string[];
  readonly output: "text" | "json";
}

/** `migrate`'s own flags. */
export const MIGRATE_FLAGS: readonly FlagDef[] = [
  commandFlag("to", "MODE", "the mode to move to: iptables, nftables, ipvs or userspace"),
  commandFlag(
    "from-mode",
    "MODE",
    "the mode programming the node now (default: the first whose rules are found)",
  ),
  RULES_FLAG,
  OUTPUT_FLAG,
  nodeIPFlag("the node's addresses the target is rendered with (default: its Node object's)"),
];

/** Reads `migrate`'s flags. @throws {UsageError} naming what is wrong. */
export function parseMigrateQuery({ given, givenAll }: CommandArgs): MigrateQuery {
  const mode = (flag: string): ProxyMode | undefined => {
    const v = given(flag);
    if (v === undefined) return undefined;
    if (!(PROXY_MODES as readonly string[]).includes(v)) {
      throw new UsageError(`--${flag}: invalid value ${JSON.stringify(v)} (${PROXY_MODES.join(", ")})`);
    }
    return v as ProxyMode;
  };
  const to = mode("to");
  if (to === undefined) throw new UsageError("migrate: needs --to=MODE, the mode to move to");
  const output = parseOutput(given);
  const nodeIPs = parseNodeIPs(given);
  return {
    to,
    from: mode("from-mode"),
    rulesFiles: givenAll("rules"),
    output,
    ...(nodeIPs === undefined ? {} : { nodeIPs }),
  };
}
