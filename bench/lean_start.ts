/**
 * The cold bench's second reference beside the kernel's floor: a lean start. A process of the same
 * runtime lists what the program lists from the same API server, parses each list whole, and loads
 * the program's own first-sync transaction as the program loads a new table (`fresh_load.ts`): the
 * layout, then the element statements in parts over {@linkcode FRESH_LANES} lanes (of at most
 * {@linkcode FRESH_CHUNK_STATEMENTS} statements, as even as the program splits what is left once its
 * build has ended; each lane an `nft -i` taking {@linkcode LANE_STATEMENTS} of them at a time, from
 * whichever part is being taken, as the program's do),
 * then the hooked chains' rules. It keeps no model and computes no
 * element: the transaction is written ahead to files it reads. What it takes is what a start costs
 * with nothing between the lists and the kernel, so the program's start less it is what the
 * program's own work adds.
 *
 * Run as a file, it is that process: `lean_start.ts MASTER DIR` (DIR from {@linkcode writeLeanParts}).
 * @module
 */
import {
  evenPartStatements,
  FRESH_CHUNK_STATEMENTS,
  FRESH_LANES,
  LANE_STATEMENTS,
} from "../proxier/nftables/fresh_load.ts";
import { NftRunner } from "../iptables/nft.ts";
import { DenoSessionExecutor } from "../iptables/tool_session.ts";
import { requestURL, sourceQueries } from "../proxier/sources/api_client.ts";
import { sh } from "./chain_watch.ts";

/** The transaction's parts, in the order of a new table's load. */
export interface LeanParts {
  /** Every statement before the first `add element`. */
  readonly layout: string;
  /** The element statements in parts (`evenPartStatements`). */
  readonly parts: readonly string[];
  /** Every statement after the last `add element` of the run that follows the layout. */
  readonly hooks: string;
}

/**
 * Splits `transaction` (one `nft -f` text, a statement a line) into a new table's load: its layout,
 * its element statements in parts, and what follows them.
 * @throws {Error} when it holds no `add element` statement.
 */
export function leanParts(transaction: string): LeanParts {
  const lines = transaction.split("\n");
  const first = lines.findIndex((l) => l.startsWith("add element "));
  if (first < 0) throw new Error("the transaction holds no add element statement");
  let end = first;
  while (end < lines.length && lines[end].startsWith("add element ")) end++;
  const size = evenPartStatements(end - first, FRESH_CHUNK_STATEMENTS);
  const parts: string[] = [];
  for (let i = first; i < end; i += size) {
    parts.push(lines.slice(i, Math.min(end, i + size)).join("\n") + "\n");
  }
  return {
    layout: lines.slice(0, first).join("\n") + "\n",
    parts,
    hooks: lines.slice(end).join("\n"),
  };
}

/** Writes `p` into `dir` as the lean start reads it (`layout.nft`, `part-<i>.nft`, `hooks.nft`). */
export async function writeLeanParts(dir: string, p: LeanParts): Promise<void> {
  await Deno.writeTextFile(`${dir}/layout.nft`, p.layout);
  await Deno.writeTextFile(`${dir}/hooks.nft`, p.hooks);
  for (const [i, part] of p.parts.entries()) await Deno.writeTextFile(`${dir}/part-${i}.nft`, part);
}

/** One `nft -f FILE`; throws with nft's stderr when it fails. */
async function load(file: string): Promise<void> {
  const loaded = await sh("nft", ["-f", file]);
  if (loaded.code !== 0) throw new Error(`nft -f ${file}: ${loaded.err.slice(0, 300)}`);
}

/** The lean start itself: see the module doc. */
async function leanStart(master: string, dir: string): Promise<void> {
  await Promise.all(
    Object.values(sourceQueries("node-a")).map(async ({ path, query }) => {
      const res = await fetch(requestURL(master, path, query));
      if (!res.ok) throw new Error(`listing ${path} answered ${res.status}`);
      return JSON.parse(await res.text());
    }),
  );
  await load(`${dir}/layout.nft`);
  const parts = [...Deno.readDirSync(dir)].filter((f) => f.name.startsWith("part-")).length;
  const runner = new NftRunner({ exec: new DenoSessionExecutor(), family: "IPv4" });
  let next = 0;
  let left: string[] = [];
  const lane = async () => {
    // As the program's lanes: an nft kept running, taking a transaction's statements at a time.
    const lane = runner.lane()!;
    try {
      while (left.length > 0 || next < parts) {
        if (left.length === 0) {
          left = Deno.readTextFileSync(`${dir}/part-${next++}.nft`).split("\n").filter((l) => l !== "");
        }
        await lane.apply(left.splice(0, LANE_STATEMENTS));
      }
    } finally {
      await lane.close();
    }
  };
  await Promise.all(Array.from({ length: FRESH_LANES }, lane));
  await load(`${dir}/hooks.nft`);
}

if (import.meta.main) {
  const [master, dir] = Deno.args;
  await leanStart(master, dir);
}
