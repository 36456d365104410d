/**
 * The flags the read-side commands share (`--output`, `--node-ip`, `--rules`): one definition and
 * one reading each, so every command that takes one takes it the same way.
 * @module
 */
import { UsageError } from "../runtime/errors.ts";
import type { FlagDef } from "../options/flag_table.ts";
import { parseIPList } from "../options/values.ts";

/** A command's own flag, as `--help` lists it. */
export function commandFlag(name: string, type: string, help: string, def = ""): FlagDef {
  return { name, origin: "command", type, default: def, withConfig: true, help };
}

/** `--output`: the report's format. */
export const OUTPUT_FLAG: FlagDef = commandFlag("output", "text|json", "the report's format", "text");

/** `--rules`: a saved listing instead of the live rules. */
export const RULES_FLAG: FlagDef = commandFlag(
  "rules",
  "FILE",
  "read the rules of a file (a render output, iptables-save, nft list ruleset, ipvsadm -S) instead of the live ones",
);

/** `--node-ip`, with what the addresses stand for in the command that takes it. */
export function nodeIPFlag(help: string): FlagDef {
  return commandFlag("node-ip", "IP[,IP]", help);
}

/** Returns `--output`'s value. @throws {UsageError} for anything but text or json. */
export function parseOutput(given: (flag: string) => string | undefined): "text" | "json" {
  const output = given("output") ?? "text";
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output: invalid value ${JSON.stringify(output)} (text or json)`);
  }
  return output;
}

/** Returns `--node-ip`'s addresses, undefined when it is not given. @throws {UsageError} naming it. */
export function parseNodeIPs(given: (flag: string) => string | undefined): string[] | undefined {
  const s = given("node-ip");
  return s === undefined ? undefined : parseIPList("--node-ip", s);
}
