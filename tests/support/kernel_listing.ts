/**
 * Listings printed by the kernel, for tests that stand for a node's rules: rules (this program's
 * render, a stand-in's transaction, upstream's own) loaded into a fresh network namespace with the
 * kernel's own tools and listed back, as an operator's `nft list ruleset` or `iptables-save` prints
 * them. And the pieces of a listing by name, for comparing two listings whatever order the tools
 * printed them in.
 * @module
 */
import { type NetnsExecutor, withNamespace } from "./namespace.ts";

async function run(exec: NetnsExecutor, cmd: string, args: string[], stdin?: string): Promise<string> {
  const r = await exec.run(cmd, { args, stdin });
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(" ")}: exit ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/**
 * Loads `script` (an `nft -f` transaction) into a fresh namespace, runs `then` there (to add what a
 * live node holds: affinity entries...), and returns `nft list ruleset`.
 */
export function nftListing(
  script: string,
  then?: (exec: NetnsExecutor) => Promise<void>,
): Promise<string> {
  return withNamespace(async (exec) => {
    await run(exec, "nft", ["-f", "-"], script);
    await then?.(exec);
    return await run(exec, "nft", ["list", "ruleset"]);
  });
}

/**
 * Loads `ipv4` (and `ipv6`, when given) `iptables-restore` input into a fresh namespace on the
 * `nft` backend and returns `iptables-save` then `ip6tables-save`, one after the other as an
 * operator would collect a dual-stack node's rules in one file.
 */
export function iptablesListing(ipv4: string, ipv6?: string): Promise<string> {
  return withNamespace(async (exec) => {
    await run(exec, "iptables-nft-restore", ["--noflush"], ipv4);
    if (ipv6 !== undefined) await run(exec, "ip6tables-nft-restore", ["--noflush"], ipv6);
    const v4 = await run(exec, "iptables-nft-save", []);
    return ipv6 === undefined ? v4 : v4 + await run(exec, "ip6tables-nft-save", []);
  });
}

/**
 * The blocks of an `nft list` listing by `family table kind name` (`ip kube-proxy chain services`),
 * each its lines trimmed, an `elements = { ... }` list as one line of sorted elements (nft orders
 * them by hash), `expires` left out; the table's own lines under `family table`.
 */
export function nftBlocks(listing: string): Map<string, string> {
  const out = new Map<string, string>();
  let table = "";
  let block = "";
  let lines: string[] = [];
  let elements: string | undefined;
  const close = () => {
    out.set(block, lines.join("\n"));
    lines = [];
  };
  for (const raw of listing.split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    if (elements !== undefined) {
      elements += ` ${line}`;
      if (!line.endsWith("}")) continue;
      lines.push(sortedElements(elements));
      elements = undefined;
      continue;
    }
    const t = /^table (\S+) (\S+) \{$/.exec(line);
    if (t !== null) {
      table = block = `${t[1]} ${t[2]}`;
      continue;
    }
    const b = /^(chain|set|map) (\S+) \{$/.exec(line);
    if (b !== null) {
      if (block === table) close();
      block = `${table} ${b[1]} ${b[2]}`;
      continue;
    }
    if (line === "}") {
      close();
      block = table;
      continue;
    }
    if (line.startsWith("elements = {")) {
      if (line.endsWith("}")) lines.push(sortedElements(line));
      else elements = line;
      continue;
    }
    lines.push(line);
  }
  return out;
}

/** `elements = { ... }` with its elements sorted and their `expires` left out. */
function sortedElements(text: string): string {
  const items = text.slice(text.indexOf("{") + 1, text.lastIndexOf("}"))
    .split(",").map((x) => x.trim().replace(/ expires \S+/, "")).filter((x) => x !== "").sort();
  return `elements = { ${items.join(", ")} }`;
}
