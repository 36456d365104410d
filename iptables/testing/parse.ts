/**
 * Tokenizing of iptables rule text as iptables-restore reads it (double quotes group words).
 * @module
 */
import { splitArgs } from "../rule_args.ts";

export { splitArgs };

/** Returns the value following `flag` in `args`, or undefined. */
export function argValue(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

/** Returns the jump target (`-j` or `-g`) of a rule, or undefined. */
export function jumpTarget(args: readonly string[]): string | undefined {
  return argValue(args, "-j") ?? argValue(args, "-g");
}
