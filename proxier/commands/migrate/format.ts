/**
 * `migrate`'s report as people read it (`--output=text`, the default).
 * @module
 */
import type { MigrationReport } from "./compare.ts";

/** `n thing` or `n things`. */
const count = (n: number, thing: string) => `${n} ${thing}${n === 1 ? "" : "s"}`;

/**
 * The report as people read it: what could not be compared first (it is not "nothing changes"),
 * then each group, its differences and what would keep today's behaviour.
 */
export function formatMigration(r: MigrationReport): string {
  const out = [
    `node ${r.node}: ${r.from.mode} (${r.from.rules}) -> ${r.to.mode} (${r.to.rules})`,
    `NodePorts asked on ${r.nodeAddresses.addresses.join(", ") || "no address"} (${r.nodeAddresses.from})`,
    ...r.claims.map((c) => `ADDRESS CLAIM: ${c}`),
  ];
  const compared = r.unchanged +
    r.groups.reduce((n, g) => n + g.differences.filter((d) => d.client).length, 0);
  if (r.unanswered.length > 0) {
    out.push(
      `NOT COMPARED: ${count(r.unanswered.length, "connection")} of ${
        compared + r.unanswered.length
      } (listed at the end, with why): what they do after the move is unknown`,
    );
  }
  if (r.groups.length === 0) {
    out.push(
      r.unanswered.length === 0
        ? "nothing changes for any Service's clients"
        : `nothing changes for the ${count(compared, "connection")} compared`,
    );
  }
  for (const g of r.groups) {
    out.push("", `${g.title}:`);
    for (const d of g.differences) {
      const where = [d.service, d.port].filter((x) => x !== "").join(" ");
      out.push(`  ${where}${d.client === undefined ? "" : `, ${d.client}`}: ${d.before} -> ${d.after}`);
    }
    if (g.keep !== undefined) out.push(`  to keep today's behaviour: ${g.keep}`);
  }
  out.push("", `${count(r.unchanged, "connection")} unchanged`);
  if (r.unanswered.length > 0) {
    out.push(`${count(r.unanswered.length, "connection")} not compared:`);
    for (const d of r.unanswered) out.push(`  ${d.service} ${d.port}, ${d.client}: ${d.before} / ${d.after}`);
  }
  return out.join("\n") + "\n";
}
