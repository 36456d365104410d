/**
 * The bench programs still measure something: each builds a small object set through the real
 * proxier (a dry run) and reports the rules it wrote. Not a timing test: only the counts are
 * checked, so a bench whose proxier silently never syncs (it waited for a Node once) fails here.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { commandWorks, netnsAvailable } from "../support/namespace.ts";

async function bench(file: string, args: string[]): Promise<Record<string, number>> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-net", new URL(`../../bench/${file}`, import.meta.url).pathname, ...args],
  }).output();
  const out = new TextDecoder().decode(r.stdout);
  assertEquals(r.code, 0, new TextDecoder().decode(r.stderr));
  const line = out.split("\n").find((l) => l.startsWith("{"));
  assert(line !== undefined, out);
  return JSON.parse(line);
}

Deno.test("bench: iptables, nftables and ipvs programs build real rule sets for 100 services", async () => {
  const ipt = await bench("iptables.ts", ["100"]);
  // 100 services x 10 endpoints: a SEP chain with two rules per endpoint at least.
  assert(ipt.lines > 2_000 && ipt.partialLines > 0, JSON.stringify(ipt));
  const nft = await bench("nftables.ts", ["build", "100"]);
  assert(nft.lines > 100 && nft.bytes > 10_000 && nft.partialLines > 0, JSON.stringify(nft));
  const ipvs = await bench("ipvs.ts", ["build", "100"]);
  assertEquals({ ipvsadmLines: ipvs.ipvsadmLines, ipLines: ipvs.ipLines }, {
    ipvsadmLines: 1_100,
    ipLines: 100,
  });
});

Deno.test({
  name:
    "bench: the conntrack reconciler program fills a namespace's table and deletes exactly the stale flows",
  ignore: !(await netnsAvailable() && await commandWorks("conntrack")),
  async fn() {
    const r = await bench("conntrack.ts", ["200"]);
    assertEquals(
      { flows: r.flows, deletedOne: r.deletedOne, deleted: r.deleted, left: r.left },
      { flows: 200, deletedOne: 1, deleted: 2, left: 197 },
    );
  },
});

Deno.test("bench: the Maglev program's flows agree across two nodes and move about 1/N when an endpoint goes", async () => {
  const r = await bench("maglev.ts", ["flows", "10", "1021"]);
  assertEquals([r.endpoints, r.flows, r.mhAgreePct, r.shAgreePct], [10, 10_000, 100, 100], JSON.stringify(r));
  assert(r.mhMovedPct >= 9 && r.mhMovedPct < 20, JSON.stringify(r));
  assert(r.randomMovedPct > 80 && r.randomAgreePct < 20, JSON.stringify(r));
});

Deno.test("bench: the trace program parses each format's listing and explains a Maglev Service without a disagreement", async () => {
  for (const mode of ["iptables", "ipvs"]) {
    const r = await bench("trace.ts", [mode, "100"]);
    assert(r.listingMiB >= 0 && r.parseMs >= 0 && r.walkMsPerQuery >= 0, JSON.stringify(r));
  }
  // The program throws (exit 1) when the report over the listing disagrees with the model.
  const nft = await bench("trace.ts", ["nftables", "100", "2"]);
  assert(nft.listingMiB > 0.2 && nft.explainMs >= 0, JSON.stringify(nft));
});
