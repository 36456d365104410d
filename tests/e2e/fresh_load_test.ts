/**
 * A new node's first nftables sync in the real kernel: a table that does not exist yet, with more
 * elements than one part holds, is loaded in parts (`proxier/nftables/commit.ts`), those the build
 * finished while it goes on when they fill parts of their own (`fresh_load.ts`), and the
 * kernel then holds exactly what the one transaction of a start over an existing table puts there.
 */
import { benchNftablesProxier } from "../../bench/nftables_proxier.ts";
import { feedGenerated } from "../../bench/objects.ts";
import { type ExecOptions, type ExecResult, type Executor, inputText } from "../../iptables/executor.ts";
import { NftRunner } from "../../iptables/nft.ts";
import { normalizeListing } from "../../iptables/nft_listing.ts";
import { FRESH_CHUNK_STATEMENTS } from "../../proxier/nftables/fresh_load.ts";
import { TABLE } from "../../proxier/nftables/layout.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { realKernel, withNamespace } from "../support/namespace.ts";

const { ignore, note } = await realKernel(["nft"]);

/** Services of one endpoint: four elements each (cluster IP, service port, lb, backend), 1,000 to a statement. */
const SERVICES = Math.ceil(FRESH_CHUNK_STATEMENTS * 1000 / 4) + 2000;

/** Records the `nft -f` runs it passes on, each one's input. */
class Counting implements Executor {
  readonly inputs: string[] = [];
  constructor(readonly inner: Executor) {}
  get applies(): number {
    return this.inputs.length;
  }
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    if (cmd !== "nft" || !opts.args.includes("-f") || opts.args.includes("-c")) {
      return this.inner.run(cmd, opts);
    }
    // The input may be read once only (statements written as they are asked for): read here, passed on.
    const input = inputText(opts.stdin ?? "");
    this.inputs.push(input);
    return this.inner.run(cmd, { ...opts, stdin: input });
  }
}

async function firstSync(exec: Executor, freshChunkStatements?: number): Promise<string> {
  const p = benchNftablesProxier(exec, { freshChunkStatements });
  feedGenerated(p, SERVICES, 1);
  await p.syncNow();
  const listed = await exec.run("nft", { args: ["list", "table", "ip", TABLE] });
  assertEquals(listed.code, 0, listed.stderr);
  return normalizeListing(listed.stdout);
}

Deno.test({
  name:
    `nftables first sync on a new node: loaded in parts, the kernel holds what one transaction puts there${note}`,
  ignore,
  fn: () =>
    withNamespace((fresh) =>
      withNamespace((streamedNs) =>
        withNamespace(async (existing) => {
          const parts = new Counting(fresh);
          const inParts = await firstSync(parts);
          // Parts of 8 statements: the cluster and service IPs fill several before the build ends.
          const streamed = new Counting(streamedNs);
          const inStreamedParts = await firstSync(streamed, 8);
          // The layout went first with the backends map (every lb chain these ports need is
          // precreated), then parts of elements: more than the build's end alone would have made.
          const layout = streamed.inputs[0];
          assert(layout.includes(`add map ip ${TABLE} backends `) && !layout.includes("add element"), layout);
          assert(streamed.applies > parts.applies, `applies: ${streamed.applies} against ${parts.applies}`);
          // Another writer's table: the start replaces it whole, in one transaction.
          const other = `add table ip ${TABLE}\nadd chain ip ${TABLE} theirs\n`;
          assertEquals((await existing.run("nft", { args: ["-f", "-"], stdin: other })).code, 0);
          const whole = new Counting(existing);
          const inOne = await firstSync(whole);
          assertEquals(whole.applies, 1);
          // The structure, two parts or more, the generation.
          assert(parts.applies >= 4, `applies: ${parts.applies}`);
          const clusterIPs = await new NftRunner({ exec: fresh, family: "IPv4" }).listElements(
            TABLE,
            "cluster-ips",
          );
          assertEquals(clusterIPs.length, SERVICES);
          assertEquals(inParts, inOne);
          assertEquals(inStreamedParts, inOne);
        })
      )
    ),
});
