/**
 * What the flag table and the commands' definitions say to people: `--help`'s text, each command's
 * `--help`, and the flag reference (`docs/flags.md`, written by `deno task docs`). Loaded only to
 * print them.
 * @module
 */
import type { CommandDefinition, CommandHelp } from "../command_definition.ts";
import { COMMANDS, DEFAULT_COMMAND } from "../commands.ts";
import { FLAG_BY_NAME, type FlagDef, FLAGS } from "../options/flag_table.ts";

/** Where help starts, after the flag and its value. */
const HELP_COLUMN = 34;

/** The commands `--help` lists (every one with help: all but the proxy itself), in the registry's order. */
const HELPED: ReadonlyArray<CommandDefinition & { readonly help: CommandHelp }> = [...COMMANDS.values()]
  .filter((c): c is CommandDefinition & { readonly help: CommandHelp } => c.help !== undefined);

/** One flag as `--help` shows it: the flag and its value, then its help (below when too long). */
function line(f: FlagDef): string {
  const head = `  ${f.shorthand ? `-${f.shorthand}, ` : ""}--${f.name}${f.bool ? "" : ` ${f.type}`}`;
  const def = f.default === "" ? "" : ` (default ${f.default})`;
  const help = `${f.help}${def}`;
  // At least two spaces between the flag and its help, as pflag prints them: one reads as one phrase.
  return head.length + 2 <= HELP_COLUMN
    ? `${head.padEnd(HELP_COLUMN)}${help}`
    : `${head}\n${" ".repeat(HELP_COLUMN)}${help}`;
}

/** A command's exit codes as `--help` shows them, one per line, from its definition. */
function exitLines(c: CommandDefinition): string {
  return c.exits.map(([code, means]) => `  ${code}  ${means}`).join("\n");
}

/** The general `--help`: the commands, then every flag of upstream's and this program's own. */
export const USAGE = `Usage: kube-proxy-deno [${HELPED.map((c) => c.name).join("|")}] [flags]
       deno task start [COMMAND] [flags]   (from a checkout: the same program and permission set)

Makes Kubernetes Services reachable on this node (a drop-in kube-proxy).

Commands ('kube-proxy-deno COMMAND --help' lists a command's own flags):
  (none)      run the proxy
${HELPED.map((c) => `  ${c.name.padEnd(10)}  ${c.help.summary}`).join("\n")}

Flags of upstream kube-proxy 1.37 (same names, defaults and meanings; "_" and "-" alike):
${FLAGS.filter((f) => f.origin === "upstream").map(line).join("\n")}

This program's own flags:
${FLAGS.filter((f) => f.origin === "ours").map(line).join("\n")}

Exit codes of the proxy:
${exitLines(DEFAULT_COMMAND)}
`;

/**
 * Returns `--help`'s text for `command`: for a command with help of its own, how it is called, what
 * it does, its own flags and the proxy's it reads; for the proxy, the general usage.
 */
export function usageOf(command: CommandDefinition): string {
  const h = command.help;
  if (h === undefined) return USAGE;
  return `Usage: kube-proxy-deno ${h.synopsis}
       deno task start ${h.synopsis}   (from a checkout)

${h.about}

Flags:
${command.flags.map(line).join("\n")}

The proxy's flags it reads (as the running proxy takes them; --config for its file):
${h.related.map((n) => line(FLAG_BY_NAME.get(n)!)).join("\n")}

Exit codes:
${exitLines(command)}
`;
}

/** How the reference says what this program does with `f`, beside upstream's meaning. */
function here(f: FlagDef): string {
  if (f.origin === "ours") return "ours";
  if (f.notApplying !== undefined) return `accepted; named at start as not applying (${f.notApplying})`;
  return f.differs ?? "as upstream";
}

/** Escapes `|` for a Markdown table cell. */
const cell = (s: string) => s.replaceAll("|", "\\|");

/**
 * Returns the flag reference (`docs/flags.md`) as Markdown: every flag of the table, upstream's and
 * this program's, with its type, default, what this program does with it and what it means; then a
 * section per command with its own flags.
 */
export function flagReference(): string {
  const row = (f: FlagDef) =>
    `| \`--${f.name}\`${f.shorthand ? ` (\`-${f.shorthand}\`)` : ""} | ${cell(f.type)} | ${
      f.default === "" ? "" : `\`${cell(f.default)}\``
    } | ${cell(here(f))} | ${cell(f.help)} |`;
  const table = (fs: readonly FlagDef[]) =>
    ["| flag | type | default | here | meaning |", "| --- | --- | --- | --- | --- |", ...fs.map(row)].join(
      "\n",
    );
  const commandRow = (f: FlagDef) =>
    `| \`--${f.name}\` | ${cell(f.type)} | ${f.default === "" ? "" : `\`${cell(f.default)}\``} | ${
      cell(f.help)
    } |`;
  const commands = HELPED.map(({ name, help: h, flags, exits }) =>
    `### \`${name}\`

\`kube-proxy-deno ${h.synopsis}\` (from a checkout: \`deno task start ${h.synopsis}\`): ${h.summary}.

${h.about.replaceAll("\n", " ")}

| flag | type | default | meaning |
| --- | --- | --- | --- |
${flags.map(commandRow).join("\n")}

It reads these of the proxy's flags: ${h.related.map((n) => `\`--${n}\``).join(", ")}.

Exit codes: ${exits.map(([code, means]) => `${code}, ${means}`).join("; ")}.`
  ).join("\n\n");
  return `# Flag reference

Generated from the flag table (\`proxier/options/flag_table.ts\`) by \`deno task docs\`; a test fails when
this file and the table differ. \`kube-proxy-deno --help\` prints the same flags, and
\`kube-proxy-deno COMMAND --help\` a command's. From a checkout every command runs as \`deno task start COMMAND ...\`.

Flags parse as upstream's (spf13/pflag): \`--flag=value\` or \`--flag value\`, booleans as \`--flag\` or
\`--flag=false\`, \`-v=2\`, \`-v 2\` and \`-v2\`, \`_\` and \`-\` alike (\`--conntrack_min\` is \`--conntrack-min\`).
A bad value exits 2 naming the flag. With \`--config\`, the file replaces the proxy flags, as upstream: see
\`deploy/README.md\` for which flags still apply beside it.

## Flags of upstream kube-proxy 1.37

${table(FLAGS.filter((f) => f.origin === "upstream"))}

## This program's own flags

${table(FLAGS.filter((f) => f.origin === "ours"))}

## Commands

${commands}
`;
}
