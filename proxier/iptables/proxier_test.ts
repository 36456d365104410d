import { syncMarkRule } from "./sync_mark.ts";
import { tracePacket } from "../trace/iptables_walker.ts";
import { assert, assertEquals, assertRejects } from "../../tests/support/assert.ts";
import {
  ep,
  HOSTILE,
  makeEndpointSlice,
  makeNode,
  makeService,
  NODE,
  ZONE_LABEL,
} from "../../tests/support/fixtures.ts";
import { iptablesSetup } from "../../tests/flows/iptables_datapath.ts";
import { NODE_A_TWO_IPS, NODE_A_ZONE_A, NODE_IP, TOPOLOGY } from "../../tests/flows/objects.ts";
import { RestoreError } from "../../iptables/iptables.ts";
import { servicePortChainName } from "./chain_name.ts";
import { JUMP_CHAINS, KUBE_PROXY_CANARY, KUBE_PROXY_DENO_SYNC, SERVICE_CHAIN } from "./rules.ts";
import { jumpRuleArgs, jumpRuleLine } from "../_common/iptables_chains.ts";
import { IptablesRunner } from "../../iptables/iptables.ts";
import { commandWorks, netnsAvailable, withNamespace } from "../../tests/support/namespace.ts";
import { assertGolden } from "../../tests/support/golden.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { FakeNfacct } from "../../iptables/testing/fake_nfacct.ts";
import { ProxyMetrics } from "../metrics.ts";
import { CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED, nfacctMetrics } from "./metrics.ts";
import { usableNfacctCounters } from "./mode.ts";

const SVC1 = "KUBE-SVC-XPGD46QRK7WJZT7O";
const SVC2 = "KUBE-SVC-GNZBNJ2PO5MGZ6GT";
const reach = (fake: Parameters<typeof tracePacket>[0], dst: string) =>
  tracePacket(fake, { src: "10.180.5.5", dst, port: 80, protocol: "tcp" }, [NODE_IP]).endpoints;

Deno.test("partial sync: one endpoint change rewrites only that service's chains", async () => {
  const { fake, proxier } = iptablesSetup();
  await proxier.syncNow();
  assert(fake.restores[0].includes(`:${SVC2} - [0:0]`), "first sync is full");
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1"), ep("10.180.0.10")]),
  );
  await proxier.syncNow();
  const partial = fake.restores[1];
  assert(partial.includes(`:${SVC1} - [0:0]`), "changed service chain rewritten");
  assert(!partial.includes(`:${SVC2} - [0:0]`), "unchanged service chain omitted");
  assert(!partial.includes(`-A ${SVC2} `), "unchanged service rules omitted");
  assert(partial.includes(`-j ${SVC2}`), "KUBE-SERVICES still jumps to unchanged chains");
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.10:80", "10.180.0.1:80"]);
  assertEquals(reach(fake, "172.30.0.42"), ["10.180.0.2:80", "10.180.0.3:80"], "other services intact");
});

Deno.test("partial sync: a deleted service's chains are removed", async () => {
  const { fake, proxier } = iptablesSetup();
  await proxier.syncNow();
  proxier.onServiceDelete(makeService("ns1", "svc1"));
  await proxier.syncNow();
  const last = fake.restores.at(-1)!;
  assert(last.includes(`-X ${SVC1}`) && last.includes("-X KUBE-SEP-SXIVWICOYRO3J4NJ"), last);
  assertEquals(fake.rules("nat", SVC1), undefined);
  assertEquals(fake.rules("nat", "KUBE-SEP-SXIVWICOYRO3J4NJ"), undefined);
  assertEquals(reach(fake, "172.30.0.41"), []);
});

Deno.test("a failed restore keeps the previous rules, is counted, and the next sync is full", async () => {
  const { fake, proxier, metrics, log } = iptablesSetup();
  await proxier.syncNow();
  const before = fake.saveSync("nat");
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.11")]),
  );
  fake.failNextRestore = "line 7 failed";
  await assertRejects(() => proxier.syncNow(), RestoreError);
  assertEquals(fake.saveSync("nat"), before);
  const exposed = await metrics.registry.metrics();
  assert(
    exposed.includes('kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"} 1'),
    exposed,
  );
  assert(
    exposed.includes(
      'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total{ip_family="IPv4"} 1',
    ),
  );
  assertEquals(log.messages("error"), [
    "Sync failed; the previous rules stay in place and the next sync is full",
  ]);
  await proxier.syncNow();
  const next = fake.restores.at(-1)!;
  assert(next.includes(`:${SVC2} - [0:0]`), "after a failure the sync is full");
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.11:80"]);
});

Deno.test("a vanished canary (tables flushed) forces a full sync that restores everything", async () => {
  const { fake, proxier } = iptablesSetup();
  await proxier.syncNow();
  for (const t of ["mangle", "nat", "filter"] as const) fake.removeChainForTest(t, KUBE_PROXY_CANARY);
  for (const c of fake.chains("nat").filter((c) => c.startsWith("KUBE-"))) fake.removeChainForTest("nat", c);
  proxier.onServiceUpdate(
    makeService("ns1", "svc1"),
    makeService("ns1", "svc1", (s) => s.metadata!.labels = { a: "b" }),
  );
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1"), ep("10.180.0.12")]),
  );
  await proxier.syncNow();
  assert(fake.restores.at(-1)!.includes(`:${SVC2} - [0:0]`));
  assert(await fake.chainExists("mangle", KUBE_PROXY_CANARY));
  assertEquals(reach(fake, "172.30.0.42"), ["10.180.0.2:80", "10.180.0.3:80"]);
  assert(fake.rules("nat", "PREROUTING")!.some((r) => r.endsWith("-j KUBE-SERVICES")), "jump rules restored");
});

Deno.test("the conntrack reconciler runs after each sync, counted under upstream's names", async () => {
  const { proxier, conntrack, metrics } = iptablesSetup({}, "empty");
  const svc = makeService("ns1", "dns", (s) => s.spec!.ports = [{ name: "dns", port: 53, protocol: "UDP" }]);
  const slice = (ips: string[]) =>
    makeEndpointSlice("ns1", "dns", (s) => {
      s.ports = [{ name: "dns", port: 53, protocol: "UDP" }];
      s.endpoints = ips.map((ip) => ep(ip));
    });
  proxier.onServiceAdd(svc);
  proxier.onEndpointSliceAdd(slice(["10.180.0.1", "10.180.0.2"]));
  await proxier.syncNow();
  conntrack.add("udp", "10.180.5.5:4000", "172.30.0.41:53", "10.180.0.1:53");
  conntrack.add("udp", "10.180.5.5:4001", "172.30.0.41:53", "10.180.0.2:53");
  proxier.onEndpointSliceUpdate(slice([]), slice(["10.180.0.2"]));
  await proxier.syncNow();
  assertEquals(conntrack.flows.map((f) => `${f.origSport}->${f.replySrc}`), ["4001->10.180.0.2"]);
  const page = await metrics.registry.metrics();
  assertEquals(
    page.match(/^kubeproxy_conntrack_reconciler_(deleted_entries_total|sync_duration_seconds_count)\{.*$/gm),
    [
      'kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family="IPv4"} 1',
      'kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"} 1',
    ],
  );
});

Deno.test("hostile input never changes rule text beyond quoted comments", async () => {
  const { fake, proxier, log } = iptablesSetup({}, "empty");
  proxier.onServiceAdd(makeService("ns1", "good"));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "good", (s) => s.endpoints = [ep("10.180.0.1")]));
  for (const [i, h] of HOSTILE.entries()) {
    proxier.onServiceAdd(makeService("ns1", `name${i}`, (s) => s.metadata!.name = h));
    proxier.onServiceAdd(makeService(h, `ns${i}`));
    proxier.onServiceAdd(makeService("ns1", `port${i}`, (s) => s.spec!.ports![0].name = h));
    proxier.onServiceAdd(makeService("ns1", `ip${i}`, (s) => s.spec!.clusterIPs = [h]));
    proxier.onServiceAdd(makeService("ns1", `ann${i}`, (s) => {
      s.spec!.clusterIPs = [`172.30.1.${i + 1}`];
      s.metadata!.annotations = { x: h };
      s.metadata!.labels = { y: h.slice(0, 60) };
      s.spec!.externalIPs = [h, "192.168.99.9"];
      s.spec!.type = "LoadBalancer";
      s.spec!.loadBalancerSourceRanges = [h];
      s.status = { loadBalancer: { ingress: [{ ip: h }, { ip: "192.168.99.50", hostname: h }] } };
    }));
    proxier.onEndpointSliceAdd(
      makeEndpointSlice("ns1", `ann${i}`, (s) => s.endpoints = [ep(h), ep("10.180.9.9")]),
    );
    proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", `ann${i}`, (s) => {
      s.metadata!.name = `ann${i}-b`;
      s.endpoints = [ep("10.180.8.8")];
      s.ports = [{ name: h, port: 80, protocol: "TCP" }];
    }));
    proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", `ann${i}`, (s) => {
      s.metadata!.name = `ann${i}-c`;
      s.endpoints = [ep("10.180.7.7")];
    }));
  }
  await proxier.syncNow();
  const text = fake.restores.at(-1)!;
  for (const h of HOSTILE.filter((h) => h !== "-j ACCEPT")) {
    assert(!text.includes(h), `hostile text leaked: ${JSON.stringify(h.slice(0, 40))}`);
  }
  assertEquals(
    text.split("\n").filter((l) => l.includes("-j ACCEPT")).length,
    2,
    "only KUBE-FORWARD accepts",
  );
  // Every line has the shape of our rules: declarations, -A with known chains, -X, table markers.
  for (const line of text.split("\n")) {
    assert(
      line === "" || line === "COMMIT" || /^\*(filter|nat|mangle)$/.test(line) ||
        JUMP_CHAINS.map(jumpRuleLine).includes(line) ||
        /^:KUBE-[A-Z0-9-]+ - \[0:0\]$/.test(line) ||
        /^-A KUBE-[A-Z0-9-]+ [-!a-z0-9A-Z./:" >;,]+$/.test(line),
      line,
    );
    if (line.startsWith("-A")) assertEquals(line.split('"').length % 2, 1, `balanced quotes: ${line}`);
  }
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.1:80"], "the good service works");
  // Services with only bad fields skipped are programmed without them; the firewall admits nobody.
  const lb = tracePacket(fake, { src: "192.168.99.1", dst: "192.168.99.50", port: 80, protocol: "tcp" }, [
    NODE_IP,
  ]);
  assertEquals(lb.verdict, "DROP", "invalid source ranges fail closed");
  assert(log.messages("warn").length >= HOSTILE.length * 4, "each bad object or field is warned about");
});

Deno.test("dual-stack: the IPv6 proxier programs the IPv6 half of the same objects", async () => {
  const { fake, proxier } = iptablesSetup({
    family: "IPv6",
    nodeIPs: ["fd00:0:2::2"],
    localDetection: { mode: "ClusterCIDR", clusterCIDRs: ["10.180.0.0/16", "fd00:180::/64"] },
  }, "empty");
  proxier.onServiceAdd(makeService("ns1", "svc1", (s) => {
    s.spec!.clusterIPs = ["172.30.0.41", "fd00:30::41"];
    s.spec!.ipFamilies = ["IPv4", "IPv6"];
  }));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => {
    s.metadata!.name = "svc1-v6";
    s.addressType = "IPv6";
    s.endpoints = [ep("fd00:180::1")];
  }));
  await proxier.syncNow();
  const text = fake.restores.at(-1)!;
  assert(text.includes("-d fd00:30::41/128 -p tcp") && !text.includes("172.30.0.41"), text);
  assert(text.includes("--to-destination [fd00:180::1]:80") && text.includes("! -s fd00:180::/64"), text);
  assert(text.includes("! -d ::1/128") && !text.includes("KUBE-FIREWALL"), "no localhost node ports on IPv6");
  const r = tracePacket(fake, { src: "fd00:180::9", dst: "fd00:30::41", port: 80, protocol: "tcp" }, [
    "fd00:0:2::2",
  ]);
  assertEquals(r.endpoints, ["[fd00:180::1]:80"]);
});

Deno.test("detect-local-mode NodeCIDR: the Node's podCIDR decides masquerading; a change resyncs fully", async () => {
  const { fake, proxier } = iptablesSetup({ localDetection: { mode: "NodeCIDR", clusterCIDRs: [] } });
  await proxier.syncNow();
  assert(!fake.restores.at(-1)!.includes(`-A ${SVC1} ! -s`), "no local detection before the Node is known");
  const node = (cidr: string) => ({
    metadata: { name: "node-a" },
    spec: { podCIDR: cidr, podCIDRs: [cidr] },
  });
  proxier.onNodeAdd(node("10.180.0.0/24"));
  await proxier.syncNow();
  assert(
    fake.restores.at(-1)!.includes(`-A ${SVC1} ! -s 10.180.0.0/24 -d 172.30.0.41/32`),
    fake.restores.at(-1)!,
  );
  const masq = (src: string) =>
    tracePacket(fake, { src, dst: "172.30.0.41", port: 80, protocol: "tcp" }, [NODE_IP]).masq;
  assertEquals([masq("10.180.0.9"), masq("10.180.1.9")], [false, true]);
  proxier.onNodeUpdate(node("10.180.0.0/24"), node("10.180.1.0/24"));
  await proxier.syncNow();
  assert(fake.restores.at(-1)!.includes(`:${SVC2} - [0:0]`), "podCIDR change: full sync");
  assertEquals([masq("10.180.0.9"), masq("10.180.1.9")], [true, false]);
});

Deno.test("--nodeport-addresses=primary: every node address until the Node's InternalIP is known, then that one, as upstream", async () => {
  const { fake, proxier } = iptablesSetup({ nodePortAddresses: ["primary"] }, { node: NODE_A_TWO_IPS });
  const answering = () =>
    NODE_A_TWO_IPS.ips.filter((dst) =>
      tracePacket(fake, { src: "192.168.0.10", dst, port: 3003, protocol: "tcp" }, NODE_A_TWO_IPS.ips)
        .verdict === "DNAT"
    );
  await proxier.syncNow();
  assertEquals(answering(), [NODE_IP, "10.99.0.1"], "primary unknown: upstream's 0.0.0.0/0");
  const node = (ip: string) => ({
    metadata: { name: "node-a" },
    status: {
      addresses: [{ type: "ExternalIP", address: "203.0.113.9" }, { type: "InternalIP", address: ip }],
    },
  });
  proxier.onNodeAdd(node(NODE_IP));
  await proxier.syncNow();
  assertEquals(answering(), [NODE_IP]);
  proxier.onNodeUpdate(node(NODE_IP), node("10.99.0.1"));
  await proxier.syncNow();
  assertEquals(answering(), ["10.99.0.1"]);
});

Deno.test("a zone label change on the Node re-selects hinted endpoints with a full sync", async () => {
  const { fake, proxier } = iptablesSetup({}, { objects: TOPOLOGY, node: NODE_A_ZONE_A });
  await proxier.syncNow();
  assertEquals(reach(fake, "172.30.1.1"), ["10.180.1.1:80"]);
  proxier.onNodeUpdate(
    makeNode(NODE, { [ZONE_LABEL]: "zone-a" }),
    makeNode(NODE, { [ZONE_LABEL]: "zone-b" }),
  );
  await proxier.syncNow();
  const unchanged = servicePortChainName("KUBE-SVC-", "topo/unhinted:p80", "tcp");
  assert(fake.restores.at(-1)!.includes(`:${unchanged} - [0:0]`), "the sync after a zone change is full");
  assertEquals(reach(fake, "172.30.1.1"), ["10.180.1.2:80"]);
  assertEquals(reach(fake, "172.30.1.2"), ["10.180.1.3:80", "10.180.1.4:80"], "unaffected service kept");
});

Deno.test("large cluster mode: above 1,000 endpoints the per-endpoint comments go, with a full sync", async () => {
  const { fake, proxier } = iptablesSetup({}, "empty");
  const add = (i: number) => {
    proxier.onServiceAdd(
      makeService("big", `s${i}`, (s) => s.spec!.clusterIPs = [`172.30.${i >> 8}.${i & 255}`]),
    );
    proxier.onEndpointSliceAdd(makeEndpointSlice("big", `s${i}`, (s) => {
      s.endpoints = Array.from({ length: 10 }, (_, k) => ep(`10.180.${i}.${k + 1}`));
    }));
  };
  for (let i = 0; i < 100; i++) add(i);
  await proxier.syncNow();
  assert(
    fake.restores[0].includes(`-m comment --comment "big/s0:p80 -> 10.180.0.1:80"`),
    "1,000 endpoints: comments",
  );
  add(100);
  await proxier.syncNow();
  const large = fake.restores[1];
  assert(
    large.includes(`-A ${servicePortChainName("KUBE-SVC-", "big/s0:p80", "tcp")} `),
    "the switch is a full sync",
  );
  assert(!large.includes(" -> 10.180."), "no per-endpoint comments");
  assert(large.includes(`"big/s0:p80 cluster IP"`), "service-level comments stay");
  assertEquals(reach(fake, "172.30.0.100").length, 10, "still balanced over 10 endpoints");
});

Deno.test("iptables golden: the representative services' rules", async () => {
  const { fake, proxier } = iptablesSetup();
  await proxier.syncNow();
  await assertGolden("iptables_golden.txt", fake.restores.at(-1)!);
});

const BUILT_IN = { filter: ["INPUT", "FORWARD", "OUTPUT"], nat: ["PREROUTING", "OUTPUT", "POSTROUTING"] };
/** The rules of the built-in chains as iptables-save prints them. */
async function builtInRules(ipt: { save(t: "filter" | "nat"): Promise<string> }): Promise<string[]> {
  const out: string[] = [];
  for (const t of ["filter", "nat"] as const) {
    const lines = (await ipt.save(t)).split("\n");
    out.push(
      ...lines.filter((l) => BUILT_IN[t].some((c) => l.startsWith(`-A ${c} `))).map((l) => `${t} ${l}`),
    );
  }
  return out.sort();
}

Deno.test("full syncs insert each jump from the built-in chains once, and put back one that was deleted", async () => {
  const { fake, proxier } = iptablesSetup();
  await proxier.syncNow();
  const first = await builtInRules(fake);
  assertEquals(first.length, JUMP_CHAINS.length, first.join("\n"));
  await fake.deleteRule("filter", "INPUT", jumpRuleArgs(JUMP_CHAINS[0]));
  // A zone change makes the next sync full.
  proxier.onNodeUpdate(makeNode(NODE), makeNode(NODE, { [ZONE_LABEL]: "zone-b" }));
  await proxier.syncNow();
  assertEquals(await builtInRules(fake), first);
  assertEquals(fake.restores.at(-1)!.split("\n").filter((l) => l.startsWith("-I ")), [
    jumpRuleLine(JUMP_CHAINS[0]),
  ]);
});

for (const backend of ["nft", "legacy"] as const) {
  Deno.test({
    name: `real iptables (${backend}): the jumps are recognised in iptables-save's form, never doubled`,
    ignore: !(await netnsAvailable()) || !(await commandWorks(`iptables-${backend}`)),
    async fn() {
      await withNamespace(async (exec) => {
        const iptables = new IptablesRunner({ exec, family: "IPv4", backend });
        const { proxier } = iptablesSetup({ iptables });
        await proxier.syncNow();
        const first = await builtInRules(iptables);
        assertEquals(first.length, JUMP_CHAINS.length, first.join("\n"));
        proxier.onNodeUpdate(makeNode(NODE), makeNode(NODE, { [ZONE_LABEL]: "zone-b" }));
        await proxier.syncNow();
        assertEquals(await builtInRules(iptables), first);
      });
    },
  });
}

Deno.test("detect-local-mode BridgeInterface / InterfaceNamePrefix: the input interface decides masquerading", async () => {
  for (
    const [localDetection, local, other, rule] of [
      [{ mode: "BridgeInterface", clusterCIDRs: [], bridgeInterface: "cbr0" }, "cbr0", "eth0", "! -i cbr0"],
      [
        { mode: "InterfaceNamePrefix", clusterCIDRs: [], interfaceNamePrefix: "veth" },
        "veth1a2b",
        "eth0",
        "! -i veth+",
      ],
    ] as const
  ) {
    const { fake, proxier } = iptablesSetup({ localDetection });
    await proxier.syncNow();
    assert(fake.restores.at(-1)!.includes(`-A ${SVC1} ${rule} -d 172.30.0.41/32`), fake.restores.at(-1)!);
    const masq = (inInterface: string) =>
      tracePacket(fake, { src: "10.180.0.9", dst: "172.30.0.41", port: 80, protocol: "tcp", inInterface }, [
        NODE_IP,
      ]).masq;
    assertEquals([masq(local), masq(other)], [false, true], localDetection.mode);
  }
});

Deno.test("--conntrack-tcp-be-liberal: no INVALID drop in KUBE-FORWARD, as upstream", async () => {
  const strict = iptablesSetup();
  await strict.proxier.syncNow();
  assertEquals(strict.fake.rules("filter", "KUBE-FORWARD")![0], "-m conntrack --ctstate INVALID -j DROP");
  const liberal = iptablesSetup({ conntrackTCPLiberal: true });
  await liberal.proxier.syncNow();
  assert(!liberal.fake.rules("filter", "KUBE-FORWARD")!.some((r) => r.includes("INVALID")));
});

Deno.test("nfacct counters, as upstream: the INVALID drop and each NodePort on 127.0.0.0/8 feed them, the tracer reads through, /metrics reads them", async () => {
  const nfacct = new FakeNfacct();
  const { fake, proxier, log, metrics } = iptablesSetup({
    nfacctCounters: await usableNfacctCounters(nfacct, undefined, new MemoryLogger()),
  });
  nfacctMetrics(metrics.registry, nfacct, new Set([CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED]));
  await proxier.syncNow();
  const filter = fake.saveSync("filter");
  assert(
    filter.includes(
      "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP",
    ),
    filter,
  );
  const counted = fake.rules("nat", "KUBE-NODEPORTS")!.filter((r) =>
    r.includes("--nfacct-name localhost_nps_accepted_pkts")
  );
  assert(counted.length > 0 && counted.every((r) => r.startsWith("-d 127.0.0.0/8 ")), counted.join("\n"));
  // From the node to 127.0.0.1 on a NodePort of the representative objects: counted, then served.
  const viaLoopback = tracePacket(fake, {
    src: "127.0.0.1",
    dst: "127.0.0.1",
    port: 3001,
    protocol: "tcp",
    fromHost: true,
  }, [NODE_IP]);
  assertEquals(viaLoopback.verdict, "DNAT");
  assert(viaLoopback.path.some((s) => s.rule.includes("localhost_nps_accepted_pkts")));
  nfacct.count(LOCALHOST_NODEPORTS_ACCEPTED, 3);
  const scraped = await metrics.registry.metrics();
  assert(scraped.includes("\nkubeproxy_iptables_localhost_nodeports_accepted_packets_total 3\n"), scraped);
  assert(scraped.includes("\nkubeproxy_iptables_ct_state_invalid_dropped_packets_total 0\n"), scraped);
  assertEquals(log.messages("warn"), []);
});

Deno.test("nfacct counters: without the tool, or on a kernel whose iptables cannot match -m nfacct, none are used and the metrics are absent", async () => {
  const log = new MemoryLogger();
  const missing = new FakeNfacct();
  missing.failing = "nfacct: No such file or directory";
  assertEquals([...await usableNfacctCounters(missing, undefined, log)], []);
  const nfacct = new FakeNfacct();
  const noMatch = new FakeIPTables();
  noMatch.failNextRestore =
    "iptables-restore: line 3 failed: Extension nfacct revision 0 not supported, missing kernel module?";
  assertEquals([...await usableNfacctCounters(nfacct, noMatch, log)], []);
  assertEquals(
    log.messages("warn").at(-1),
    "This kernel's iptables cannot match -m nfacct (no xt_nfacct); the nfacct metrics are absent",
  );
  const works = new FakeIPTables();
  assertEquals([...await usableNfacctCounters(nfacct, works, log)].sort(), [
    CT_STATE_INVALID_DROPPED,
    LOCALHOST_NODEPORTS_ACCEPTED,
  ]);
  assertEquals(works.saveSync("filter").includes("NFACCT-PROBE"), false, "the probe chain does not stay");
  const registry = new ProxyMetrics().registry;
  nfacctMetrics(registry, nfacct, new Set());
  assertEquals((await registry.metrics()).includes("kubeproxy_iptables_"), false);
});

Deno.test("the sync mark is the last rule of KUBE-POSTROUTING; a chain of ours found beside upstream's is removed", async () => {
  const { fake, proxier } = iptablesSetup();
  await fake.restoreAll(
    [`*nat\n:${KUBE_PROXY_DENO_SYNC} - [0:0]\n-A ${KUBE_PROXY_DENO_SYNC} -m comment --comment "sync 9"\nCOMMIT\n`],
    { flush: false, counters: false },
  );
  await proxier.syncNow();
  assertEquals(fake.chains("nat").filter((c) => !SERVICE_CHAIN.test(c)).sort(), [
    "INPUT",
    "KUBE-MARK-MASQ",
    "KUBE-NODEPORTS",
    "KUBE-POSTROUTING",
    "KUBE-PROXY-CANARY",
    "KUBE-SERVICES",
    "OUTPUT",
    "POSTROUTING",
    "PREROUTING",
  ]);
  assertEquals((await fake.listRules("nat", "KUBE-POSTROUTING"))!.at(-1), syncMarkRule(1));
  // What upstream's first restore does to the chain (rewrites it whole) leaves no mark behind.
  await fake.restoreAll(
    ["*nat\n:KUBE-POSTROUTING - [0:0]\n-A KUBE-POSTROUTING -j MASQUERADE\nCOMMIT\n"],
    { flush: false, counters: false },
  );
  assert(!fake.saveSync("nat").includes("kube-proxy-deno"));
});

Deno.test("iptables: a restore another instance of this program wrote is named in the drift", async () => {
  const { fake, proxier } = iptablesSetup({ writer: "iptables/aaaaaaaa pid 1" });
  await proxier.syncNow();
  assertEquals(
    (await fake.listRules("nat", "KUBE-POSTROUTING"))!.at(-1),
    syncMarkRule(1, "iptables/aaaaaaaa pid 1"),
  );
  assertEquals(await proxier.checkDrift(), undefined);
  await fake.restoreAll(
    `*nat\n:KUBE-POSTROUTING - [0:0]\n-A KUBE-POSTROUTING -m comment --comment "kube-proxy-deno sync 3 by iptables/bbbbbbbb pid 2"\nCOMMIT\n`,
    { flush: false, counters: false },
  );
  assertEquals(
    await proxier.checkDrift(),
    "another writer programs this node: kube-proxy-deno iptables/bbbbbbbb pid 2 wrote KUBE-POSTROUTING after sync 1",
  );
});
