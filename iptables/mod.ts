/**
 * The kernel-tool layer: every kernel tool the modes run, not only iptables, each behind an
 * interface its stateful fake (`testing/`, tests only) also implements. Nothing here knows about
 * Services or modes; it imports nothing from `proxier/`.
 *
 * | file            | tool                                                                     |
 * | --------------- | ------------------------------------------------------------------------ |
 * | `executor.ts`   | runs any tool with an argument array, never a shell; deadlines           |
 * | `tool_session.ts` | a tool kept running, fed one request at a time on its stdin            |
 * | `dry_run.ts`    | an executor that records instead of running (`render`)                   |
 * | `iptables.ts`   | `iptables-save`, `iptables-restore`, single rules; both backends          |
 * | `rule_args.ts`  | splitting `iptables-save` rule text into arguments                        |
 * | `nft.ts`        | `nft -f` transactions and listings; a new table's load lanes              |
 * | `nft_session.ts`| a change's transactions (a lane's too) through one `nft -i` kept running  |
 * | `transaction_files.ts` | the sessions' files: a directory per process; a killed one's removed |
 * | `nft_ruleset.ts`| a ruleset model of `nft -f` statements and `nft list` output              |
 * | `nft_listing.ts`| reading `nft list` output back into statements; listings compared        |
 * | `ipvsadm.ts`    | `ipvsadm -R` batches, `-S`, connection and traffic counters               |
 * | `ipset.ts`      | `ipset restore` batches and `ipset save`                                  |
 * | `ip_link.ts`    | `ip`: the `kube-ipvs0` dummy interface and its addresses                  |
 * | `conntrack.ts`  | `conntrack -L` and `-D` (batched with `-R`)                               |
 * | `nfacct.ts`     | `nfacct`: the named counters `-m nfacct` rules feed                       |
 * | `sysctl.ts`     | `sysctl` reads and writes (the permission set cannot open `/proc`)        |
 * | `ip.ts`         | IP literals and CIDRs, parsed strictly (no `node:net`)                    |
 *
 * Product code imports the file it needs (a mode loads only its own tools); this module re-exports
 * them all as the layer's face.
 * @module
 */
export * from "./executor.ts";
export * from "./tool_session.ts";
export * from "./dry_run.ts";
export * from "./iptables.ts";
export * from "./rule_args.ts";
export * from "./nft.ts";
export * from "./nft_session.ts";
export * from "./transaction_files.ts";
export * from "./nft_ruleset.ts";
export * from "./nft_syntax.ts";
export * from "./nft_listing.ts";
export * from "./ipvsadm.ts";
export * from "./ipset.ts";
export * from "./ip_link.ts";
export * from "./conntrack.ts";
export * from "./nfacct.ts";
export * from "./sysctl.ts";
export * from "./ip.ts";
