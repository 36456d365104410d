/**
 * What the flag table says to people: `--help`'s text and the flag reference
 * (`docs/flags.md`, written by `deno task docs`).
 * @module
 */
import { type FlagDef, FLAGS } from "./flag_table.ts";

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

Flags of upstream kube-proxy 1.36 (same names, defaults and meanings; "_" and "-" alike):
${FLAGS.filter((f) => f.origin === "upstream").map(line).join("\n")}

This program's own flags:
${FLAGS.filter((f) => f.origin === "ours").map(line).join("\n")}
`;
})();
