/**
 * The `migrate` command's definition: its help, its flags, and its code, loaded when it runs.
 * @module
 */
import { type CommandDefinition, EXIT } from "../../command_definition.ts";
import { MIGRATE_FLAGS, type MigrateQuery, parseMigrateQuery } from "./flags.ts";

/** `kube-proxy-deno migrate --to=MODE`. */
export const migrateCommand: CommandDefinition<MigrateQuery> = {
  name: "migrate",
  help: {
    synopsis: "migrate --to=MODE [flags]",
    summary: "what moving this node to another mode or configuration would change, before it happens",
    about: `Reads what programs this node now (the live rules of this program's or upstream's iptables,
ipvs or nftables mode, read only; or a saved listing, --rules), renders --to's rules for the same
objects and the configuration the flags or --config give, and traces every Service port for every
kind of client explain knows through both. Prints only what differs (endpoints reached, verdict,
masquerading, scheduler, what a mode cannot program), grouped by cause, each with what would keep
today's behaviour. The
objects come from --source (file:PATH, or the API with the proxy's kubeconfig, listed once).
--to the mode the node runs now compares a configuration change within it.`,
    related: ["source", "config", "hostname-override", "cluster-cidr", "nodeport-addresses", "feature-gates"],
  },
  exits: [
    [EXIT.ok, "every connection compared, and nothing a client sees changes"],
    [EXIT.failed, "something changes; or the rules or objects cannot be read"],
    [
      EXIT.usage,
      "bad input: a flag, a file that does not exist, no such mode's rules, no one node to act for",
    ],
    [EXIT.notChecked, "nothing compared changes, but some connection was not compared"],
  ],
  flags: MIGRATE_FLAGS,
  maxPositionals: 0,
  positionalsSay: "migrate takes flags only",
  parse: parseMigrateQuery,
  run: async (query, context) => (await import("./migrate.ts")).runMigrate(query, context),
};
