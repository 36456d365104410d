import { assert, assertEquals, assertMatch } from "../../tests/support/assert.ts";
import { nftablesSetup } from "../../tests/flows/nftables_datapath.ts";
import { ep, makeEndpointSlice, makeService } from "../../tests/support/fixtures.ts";
import { DryRunExecutor } from "../../iptables/dry_run.ts";
import { nftablesMode } from "../nftables/mode.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import { TABLE } from "../nftables/layout.ts";
import { datapathCheck } from "./datapath_check.ts";
import { addressIn } from "./clients.ts";
import { formatExplain } from "../commands/explain/format.ts";
import { type ExplainContext, explainService } from "./report.ts";
import { summarizeServices } from "./summary.ts";
import { type ObjectSet, SCHEDULERS } from "../../tests/flows/objects.ts";

/** nftables on the fake nft with the flow table's representative objects; the datapath read as `nft list` shows it. */
async function nftables(
  objects?: ObjectSet,
): Promise<{ ctx: ExplainContext; apply: (s: string) => Promise<void> }> {
  const { fake, proxier } = nftablesSetup({ maglevTableSize: 1021 }, { objects });
  await proxier.syncNow();
  const config = parseCommandLine([], () => "").config;
  return {
    ctx: {
      mode: nftablesMode,
      node: "node-a",
      rules: "live",
      views: [proxier.familyView()],
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

Deno.test("explain: another family's endpoints are named as never reached through this family's addresses", async () => {
  const objects = {
    id: "families",
    build() {
      const svc = makeService("ns1", "web", (s) => {
        s.spec!.clusterIPs = ["172.30.9.1"];
        s.spec!.clusterIP = "172.30.9.1";
      });
      return {
        services: [svc],
        slices: [
          makeEndpointSlice("ns1", "web", (x) => x.endpoints = [ep("10.180.9.1")]),
          makeEndpointSlice("ns1", "web", (x) => {
            x.metadata!.name = "web-v6";
            x.addressType = "IPv6";
            x.endpoints = [ep("fd00:180::9")];
          }),
        ],
      };
    },
  };
  const v4 = nftablesSetup({}, { objects });
  const v6 = nftablesSetup({ family: "IPv6" }, { objects });
  await v4.proxier.syncNow();
  await v6.proxier.syncNow();
  const ctx: ExplainContext = {
    mode: nftablesMode,
    node: "node-a",
    rules: "live",
    views: [v4.proxier.familyView(), v6.proxier.familyView()],
    check: (asked) => Promise.resolve(asked.map(() => undefined)),
  };
  const r = (await explainService(ctx, "ns1/web"))!;
  assertEquals(r.ports.map((p) => p.family), ["IPv4"], "the Service has no IPv6 cluster IP");
  const pod = r.ports[0].clients.find((c) => c.client === "pod")!;
  assertEquals(pod.expected.endpoints, ["10.180.9.1:80"]);
  assertEquals(pod.expected.excluded, [{
    endpoint: "[fd00:180::9]:80",
    reason: "wrong-family",
    detail: "an IPv6 address: reached only through the Service's IPv6 addresses, and it has none",
  }]);
});

Deno.test("explain: a hashing scheduler agrees with the kernel: every endpoint any client may get, and this client's slot", async () => {
  const { ctx, apply } = await nftables(SCHEDULERS);
  for (const svc of ["sched/sh", "sched/dh", "sched/mh", "sched/mh-3-tuple", "sched/rr", "sched/lc"]) {
    const r = (await explainService(ctx, svc))!;
    assertEquals(r.disagreements, 0, formatExplain(r));
  }
  const mh = (await explainService(ctx, "sched/mh"))!;
  assertEquals(
    mh.ports[0].scheduler,
    "mh: Maglev, 1021 slots, hash of the source address and port, the same endpoint on every node",
  );
  const pod = mh.ports[0].clients.find((c) => c.client === "pod")!;
  assertEquals(pod.datapath!.endpoints, ["10.180.3.51:80", "10.180.3.52:80", "10.180.3.53:80"]);
  assertMatch(
    pod.datapath!.picks![0],
    /^Maglev slot \d+ of 1021 \(jhash ip saddr \. th sport mod 1021 seed 0x6b707264\) -> 10\.180\.3\.5[123]:80$/,
  );
  assertMatch(formatExplain(mh), /\n {6}this connection: Maglev slot \d+ of 1021 /);
  assertEquals(
    (await explainService(ctx, "sched/lc"))!.ports[0].scheduler,
    "random (the default); lc is not honoured here",
  );
  // A Maglev slot rewritten behind the proxy's back: that endpoint is not the model's.
  await apply(
    `delete element ip ${TABLE} mh-internal/sched/mh/p80/m1021-s6b707264-5t { 7 }\nadd element ip ${TABLE} mh-internal/sched/mh/p80/m1021-s6b707264-5t { 7 : 10.9.9.9 . 80 }\n`,
  );
  const broken = (await explainService(ctx, "sched/mh"))!;
  assert(broken.disagreements > 0, formatExplain(broken));
  assertMatch(broken.ports[0].clients[0].disagreement!, /10\.9\.9\.9:80; the model: 10\.180\.3\.51:80/);
});
