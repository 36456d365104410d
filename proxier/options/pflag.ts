/**
 * Command-line scanning with the rules of spf13/pflag as Kubernetes components set it up:
 * `--name=value` and `--name value`, booleans as `--name` or `--name=false`, one-letter shorthands
 * (`-v=2`, `-v 2`, `-v2`), `_` and `-` alike in names (component-base's WordSepNormalizeFunc), and
 * `--` ending the flags.
 * @module
 */
import { UsageError } from "../runtime/errors.ts";

/** How a flag takes its value. */
export interface FlagShape {
  readonly name: string;
  /** Booleans take no separate argument (`--x` is true; a value only as `--x=false`). */
  readonly bool?: boolean;
  /** A one-letter alias (`v` for `-v`). */
  readonly shorthand?: string;
  /** What `--name` alone means for a non-boolean (pflag's NoOptDefVal, e.g. `--version`). */
  readonly noValue?: string;
}

/** One flag as given, in command-line order. */
export interface FlagUse {
  readonly name: string;
  readonly value: string;
}

/** The scanned command line. */
export interface ScannedArgs {
  readonly flags: readonly FlagUse[];
  readonly positionals: readonly string[];
}

/** Returns pflag's spelling of a flag name: `conntrack_min` is `conntrack-min`. */
export function normalizeFlagName(name: string): string {
  return name.replaceAll("_", "-");
}

/**
 * Splits `argv` into flags (by `shapes`) and positional arguments.
 * @throws {UsageError} for an unknown flag or a missing value, naming the flag.
 */
export function scanArgs(argv: readonly string[], shapes: readonly FlagShape[]): ScannedArgs {
  const byName = new Map(shapes.map((s) => [s.name, s]));
  const byShort = new Map(shapes.filter((s) => s.shorthand).map((s) => [s.shorthand!, s]));
  const flags: FlagUse[] = [];
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (a.startsWith("--") && a.length > 2) {
      const eq = a.indexOf("=");
      const name = normalizeFlagName(eq < 0 ? a.slice(2) : a.slice(2, eq));
      const shape = byName.get(name);
      if (shape === undefined) throw new UsageError(`unknown flag: --${name}`);
      if (eq >= 0) flags.push({ name, value: a.slice(eq + 1) });
      else if (shape.bool) flags.push({ name, value: "true" });
      else if (shape.noValue !== undefined) flags.push({ name, value: shape.noValue });
      else if (i + 1 < argv.length) flags.push({ name, value: argv[++i] });
      else throw new UsageError(`--${name}: flag needs an argument`);
      continue;
    }
    if (a.startsWith("-") && a.length > 1 && a !== "-") {
      // pflag allows several booleans after one dash; only single shorthands are defined here.
      const shape = byShort.get(a[1]);
      if (shape === undefined) throw new UsageError(`unknown shorthand flag: '${a[1]}' in ${a}`);
      const rest = a.slice(2);
      if (rest.startsWith("=")) flags.push({ name: shape.name, value: rest.slice(1) });
      else if (rest !== "") flags.push({ name: shape.name, value: rest });
      else if (shape.bool) flags.push({ name: shape.name, value: "true" });
      else if (i + 1 < argv.length) flags.push({ name: shape.name, value: argv[++i] });
      else throw new UsageError(`-${a[1]} (--${shape.name}): flag needs an argument`);
      continue;
    }
    positionals.push(a);
  }
  return { flags, positionals };
}

/** Go's strconv.ParseBool, which pflag uses. */
export function parseBool(flag: string, s: string): boolean {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(s)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(s)) return false;
  throw new UsageError(`${flag}: invalid boolean ${JSON.stringify(s)} (true or false)`);
}
