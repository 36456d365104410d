/**
 * What the flag table says to people: `--help`'s text, each command's `--help`, and the flag
 * reference (`docs/flags.md`, written by `deno task docs`), all from the one table.
 * @module
 */
import { FLAG_BY_NAME, type FlagCommand, type FlagDef, FLAGS } from "../options/flag_table.ts";

/** Where help starts, after the flag and its value. */
const HELP_COLUMN = 34;

/** The commands, in `--help`'s order: how each is called, what it does, and the proxy flags it reads. */
const COMMANDS: ReadonlyArray<{
  readonly name: FlagCommand;
  readonly synopsis: string;
  readonly summary: string;
  readonly about: string;
  /** The proxy's flags that shape what the command reads or renders (as the running proxy takes them). */
  readonly related: readonly string[];
}> = [
  {
    name: "explain",
    synopsis: "explain NAMESPACE/NAME [flags]",
    summary: "why each kind of client reaches the pods it reaches through a Service, proven by a trace",
    about: `For each port of the Service and each kind of client (a pod on this node, the node itself,
an external client on the NodePort, each external IP and each load-balancer IP, inside and outside
loadBalancerSourceRanges), prints the endpoints reached, why every other endpoint is not, what
happens instead when none is (REJECT, DROP), whether the source is masqueraded and why, and the
datapath's own answer: a trace of the connection through the rules. A difference is a
DISAGREEMENT, and the exit code is 1; clients it cannot ask about are named, with why.

With --source=file:PATH it explains the rules render would write for those objects, for the
file's one Node (or --hostname-override's): no root, nothing touched. Otherwise it asks the proxy
running on this node at its metrics address (--metrics-bind-address; give the flags or --config
the proxy runs with), which answers from its own view and this node's live rules; the same JSON is
served there at GET /debug/services/NAMESPACE/NAME.`,
    related: ["source", "proxy-mode", "hostname-override", "cluster-cidr", "metrics-bind-address", "config"],
  },
  {
    name: "trace",
    synopsis: "trace --dst IP --dport N [flags]",
    summary: "where one new connection goes through the rules: each rule hit, the endpoints, the verdict",
    about: `Prints the rules one new connection hits, the endpoints it can reach with their shares,
whether it is masqueraded, and the verdict (DNAT, REJECT, DROP, or not a service). Reads this
node's live rules (read only; needs root), a file of rules (--rules), or, with
--source=file:PATH, the rules render writes for those objects; changes nothing.`,
    related: [
      "source",
      "proxy-mode",
      "hostname-override",
      "iptables-backend",
      "detect-local-mode",
      "pod-bridge-interface",
      "pod-interface-name-prefix",
      "config",
    ],
  },
  {
    name: "migrate",
    synopsis: "migrate --to=MODE [flags]",
    summary: "what moving this node to another mode or configuration would change, before it happens",
    about: `Reads what programs this node now (the live rules of this program's or upstream's iptables,
ipvs or nftables mode, read only; or a saved listing, --rules), renders --to's rules for the same
objects and the configuration the flags or --config give, and traces every Service port for every
kind of client explain knows through both. Prints only what differs (endpoints reached, verdict,
masquerading, scheduler, what a mode cannot program), grouped by cause, each with what would keep
today's behaviour. Exit 0 when nothing changes, 1 when something does, 2 on bad input. The
objects come from --source (file:PATH, or the API with the proxy's kubeconfig, listed once).
--to the mode the node runs now compares a configuration change within it.`,
    related: ["source", "config", "hostname-override", "cluster-cidr", "nodeport-addresses", "feature-gates"],
  },
  {
    name: "render",
    synopsis: "render --source=file:PATH [flags]",
    summary: "the exact batches a full sync of --proxy-mode would apply, touching nothing",
    about: `Prints on stdout exactly what a full sync of --proxy-mode would apply for the objects of
the file source, computed by the real proxier on a dry run: no root, nothing touched. It acts for
the file's one Node (or --hostname-override's); the node addresses it used, and the warnings a
running proxy would log, go to stderr. A file that does not parse is an error naming its line.`,
    related: ["source", "proxy-mode", "hostname-override", "cluster-cidr", "config"],
  },
];

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

/** The general `--help`: the commands, then every flag of upstream's and this program's own. */
export const USAGE = `Usage: kube-proxy-deno [${COMMANDS.map((c) => c.name).join("|")}] [flags]
       deno task start [COMMAND] [flags]   (from a checkout: the same program and permission set)

Makes Kubernetes Services reachable on this node (a drop-in kube-proxy).

Commands ('kube-proxy-deno COMMAND --help' lists a command's own flags):
  (none)      run the proxy
${COMMANDS.map((c) => `  ${c.name.padEnd(10)}  ${c.summary}`).join("\n")}

Flags of upstream kube-proxy 1.37 (same names, defaults and meanings; "_" and "-" alike):
${FLAGS.filter((f) => f.origin === "upstream").map(line).join("\n")}

This program's own flags:
${FLAGS.filter((f) => f.origin === "ours").map(line).join("\n")}
`;

/** The flags `command` takes of its own. */
function ownFlags(command: FlagCommand): FlagDef[] {
  return FLAGS.filter((f) => f.commands?.includes(command) === true);
}

/** Returns `COMMAND --help`: how it is called, what it does, its own flags and the proxy's it reads. */
export function commandUsage(command: FlagCommand): string {
  const c = COMMANDS.find((x) => x.name === command)!;
  return `Usage: kube-proxy-deno ${c.synopsis}
       deno task start ${c.synopsis}   (from a checkout)

${c.about}

Flags:
${ownFlags(command).map(line).join("\n")}

The proxy's flags it reads (as the running proxy takes them; --config for its file):
${c.related.map((n) => line(FLAG_BY_NAME.get(n)!)).join("\n")}
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
  const commands = COMMANDS.map((c) =>
    `### \`${c.name}\`

\`kube-proxy-deno ${c.synopsis}\` (from a checkout: \`deno task start ${c.synopsis}\`): ${c.summary}.

${c.about.replaceAll("\n", " ")}

| flag | type | default | meaning |
| --- | --- | --- | --- |
${ownFlags(c.name).map(commandRow).join("\n")}

It reads these of the proxy's flags: ${c.related.map((n) => `\`--${n}\``).join(", ")}.`
  ).join("\n\n");
  return `# Flag reference

Generated from the flag table (\`proxier/options/flag_table.ts\`) by \`deno task docs\`; a test fails when
this file and the table differ. \`kube-proxy-deno --help\` prints the same flags, and \`kube-proxy-deno COMMAND
--help\` a command's. From a checkout every command runs as \`deno task start COMMAND ...\`.

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
