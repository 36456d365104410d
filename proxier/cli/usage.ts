/**
 * What the flag table says to people: `--help`'s text and the flag reference
 * (`docs/flags.md`, written by `deno task docs`).
 * @module
 */
import { TRACE_USAGE } from "./trace_flags.ts";
import { type FlagDef, FLAGS } from "../options/flag_table.ts";

/** Usage text for `--help`, from the flag table. */
export const USAGE = (() => {
  const line = (f: FlagDef) => {
    const head = `  ${f.shorthand ? `-${f.shorthand}, ` : ""}--${f.name}${f.bool ? "" : ` ${f.type}`}`;
    const def = f.default === "" || (f.bool && f.default === "false") ? "" : ` (default ${f.default})`;
    return `${head.padEnd(44)} ${f.help}${def}`;
  };
  return `Usage: kube-proxy-deno [render|trace] [flags]

Makes Kubernetes Services reachable on this node (a drop-in kube-proxy).

Commands:
  (none)    run the proxy
  render    print what a full sync of --proxy-mode would apply, touching nothing (needs --source=file:PATH;
            the node's addresses: --node-ip IP[,IP], else the Node object's in the source)
  trace     where one new connection goes: --dst IP --dport N [--proto tcp|udp|sctp] [--src IP]
            [--from pod|node|external] [--rules FILE] [--node-ip IP] [--output text|json]

Flags of upstream kube-proxy 1.37 (same names, defaults and meanings; "_" and "-" alike):
${FLAGS.filter((f) => f.origin === "upstream").map(line).join("\n")}

This program's own flags:
${FLAGS.filter((f) => f.origin === "ours").map(line).join("\n")}
`;
})();

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
 * this program's, with its type, default, what this program does with it and what it means.
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
  return `# Flag reference

Generated from the flag table (\`proxier/options/flag_table.ts\`) by \`deno task docs\`; a test fails when
this file and the table differ. \`kube-proxy-deno --help\` prints the same flags.

Flags parse as upstream's (spf13/pflag): \`--flag=value\` or \`--flag value\`, booleans as \`--flag\` or
\`--flag=false\`, \`-v=2\`, \`-v 2\` and \`-v2\`, \`_\` and \`-\` alike (\`--conntrack_min\` is \`--conntrack-min\`).
A bad value exits 2 naming the flag. With \`--config\`, the file replaces the proxy flags, as upstream: see
\`deploy/README.md\` for which flags still apply beside it.

## Flags of upstream kube-proxy 1.37

${table(FLAGS.filter((f) => f.origin === "upstream"))}

## This program's own flags

${table(FLAGS.filter((f) => f.origin === "ours"))}

## Commands

\`render --source=file:PATH [--node-ip IP[,IP]]\` prints what a full sync of \`--proxy-mode\` would apply and
touches nothing; \`trace\` says where one new connection goes:

\`\`\`
${TRACE_USAGE.trimEnd()}
\`\`\`
`;
}
