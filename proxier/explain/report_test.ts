import { assert, assertEquals, assertMatch } from "../../tests/support/assert.ts";
import { nftablesSetup } from "../../tests/flows/nftables_datapath.ts";
import { DryRunExecutor } from "../../iptables/dry_run.ts";
import { nftablesMode } from "../nftables/mode.ts";
import { parseCommandLine } from "../options/command_line.ts";
import { TABLE } from "../nftables/layout.ts";
import { datapathCheck } from "./check.ts";
import { addressIn } from "./clients.ts";
import { formatExplain } from "./format.ts";
import { type ExplainContext, explainService, summarizeServices } from "./report.ts";

/** nftables on the fake nft with the flow table's representative objects; the datapath read as `nft list` shows it. */
async function nftables(): Promise<{ ctx: ExplainContext; apply: (s: string) => Promise<void> }> {
  const { fake, proxier } = nftablesSetup();
  await proxier.syncNow();
  const config = parseCommandLine([], () => "").config;
  return {
    ctx: {
      mode: "nftables",
      node: "node-a",
      rules: "live",
      views: [proxier.explainView()],
      check: datapathCheck({
        tracer: nftablesMode,
        exec: new DryRunExecutor(),
        config,
        rendered: (family) => fake.listTable(family, TABLE),
      }),
    },
    apply: (s) => fake.apply(s),
  };
}

Deno.test("explain: every client of every Service agrees with the rules; an element deleted behind the proxy is a disagreement", async () => {
  const { ctx, apply } = await nftables();
  const services = summarizeServices(ctx.views).map((s) => s.service);
  assertEquals(services, [
    "ns1/svc1",
    "ns2/svc2",
    "ns3/svc3",
    "ns4/svc4",
    "ns5/svc5",
    "ns6/svc6",
    "ns7/svc7",
  ]);
  for (const s of services) {
    const r = (await explainService(ctx, s))!;
    assertEquals(r.disagreements, 0, formatExplain(r));
    assert(r.ports.every((p) => p.clients.every((c) => c.agrees === true)), formatExplain(r));
  }
  await apply(`delete element ip ${TABLE} service-ips { 172.30.0.42 . tcp . 80 }\n`);
  const r = (await explainService(ctx, "ns2/svc2"))!;
  const broken = r.ports[0].clients.filter((c) => c.agrees === false);
  assertEquals(broken.map((c) => `${c.label} / ${c.via}`), [
    "a pod on this node / cluster IP",
    "this node / cluster IP",
  ]);
  assertMatch(
    broken[0].disagreement!,
    /^the rendered nftables rules: REJECT; the model: DNAT to 10\.180\.0\.2:80, 10\.180\.0\.3:80$/,
  );
  assertEquals(r.disagreements, 2);
  assertMatch(formatExplain(r), /\n {4}DISAGREEMENT: the rendered nftables rules: REJECT;/);
  assertMatch(formatExplain(r), /\n2 DISAGREEMENTS: the datapath does not do what the proxy's view says/);
});

Deno.test("explain: one port by name or number; a Service without one is not reported", async () => {
  const { ctx } = await nftables();
  assertEquals((await explainService(ctx, "ns4/svc4", "dns"))!.ports.map((p) => p.port), [53]);
  assertEquals((await explainService(ctx, "ns4/svc4", "53"))!.ports.map((p) => p.name), ["dns"]);
  assertEquals(await explainService(ctx, "ns4/svc4", "http"), undefined);
  assertEquals(await explainService(ctx, "ns9/none"), undefined);
});

Deno.test("explain: synthetic clients take an address inside the CIDR they stand for", () => {
  assertEquals(addressIn("10.244.0.0/16"), "10.244.0.10");
  assertEquals(addressIn("192.168.0.10/32", 1), "192.168.0.10");
  assertEquals(addressIn("fd00:10:244::/64"), "fd00:10:244::a");
});
