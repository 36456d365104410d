import { type NFTables, NftError, scriptText } from "../../iptables/nft.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { affinityNotice } from "./mode.ts";
import { traceNft } from "../trace/nft_walker.ts";
import { assert, assertEquals, assertMatch, assertRejects } from "../../tests/support/assert.ts";
import { ep, makeEndpointSlice, makeService } from "../../tests/support/fixtures.ts";
import { emptyNftablesSetup, nftablesSetup } from "../../tests/flows/nftables_datapath.ts";
import { EMPTY, NODE_IP } from "../../tests/flows/objects.ts";
import { LAYOUT_MARKER, SERVICE_IPS, TABLE } from "./layout.ts";
import { SERVICE_IPS_WINDOW } from "./drift_check.ts";
import { assertGolden } from "../../tests/support/golden.ts";
import { upstreamNftablesSync } from "../../tests/support/upstream_kube_proxy.ts";
import { SyncMemory } from "../runtime/sync_memory.ts";

type Fake = ReturnType<typeof nftablesSetup>["fake"];
const reach = (fake: Fake, dst: string, src = "10.180.5.5") =>
  traceNft(fake, "IPv4", TABLE, { src, dst, port: 80, protocol: "tcp" }, [NODE_IP]).endpoints;
const lines = (tx: string) => tx.split("\n").filter((l) => l !== "");

Deno.test("nftables golden: the representative services' transaction", async () => {
  const { fake, proxier } = nftablesSetup();
  await proxier.syncNow();
  await assertGolden("nftables_golden.nft", fake.transactions.at(-1)!);
});

Deno.test("nftables partial sync: one endpoint change touches only that service's elements", async () => {
  const { fake, proxier } = nftablesSetup();
  await proxier.syncNow();
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1"), ep("10.180.0.10")]),
  );
  await proxier.syncNow();
  assertEquals(lines(fake.transactions[1]), [
    // Endpoints are indexed in sorted order ("10.180.0.10:80" < "10.180.0.1:80").
    "delete element ip kube-proxy lb { 172.30.0.41 . tcp . 80 }",
    "delete element ip kube-proxy backends { 172.30.0.41 . tcp . 80 . 0 }",
    "add element ip kube-proxy lb { 172.30.0.41 . tcp . 80 : goto lb-2 }",
    "add element ip kube-proxy backends { 172.30.0.41 . tcp . 80 . 0 : 10.180.0.10 . 80, 172.30.0.41 . tcp . 80 . 1 : 10.180.0.1 . 80 }",
    // The transaction's number, which the drift check finds in the kernel.
    "flush set ip kube-proxy sync-generation",
    "add element ip kube-proxy sync-generation { 0x00000002 }",
  ]);
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.10:80", "10.180.0.1:80"]);
  assertEquals(reach(fake, "172.30.0.42"), ["10.180.0.2:80", "10.180.0.3:80"], "other services intact");
  // A sync with nothing changed sends nothing.
  await proxier.syncNow();
  assertEquals(fake.transactions.length, 2);
});

Deno.test("nftables partial sync: a deleted service's elements go, shared ones stay", async () => {
  const { fake, proxier } = nftablesSetup();
  await proxier.syncNow();
  proxier.onServiceDelete(makeService("ns1", "svc1"));
  await proxier.syncNow();
  const tx = fake.transactions[1];
  assert(tx.includes("delete element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 }"), tx);
  assert(tx.includes("delete element ip kube-proxy cluster-ips { 172.30.0.41 }"), tx);
  assert(
    !tx.replace(/^add element ip kube-proxy sync-generation .*$/m, "").includes("add "),
    `nothing added: ${tx}`,
  );
  assertEquals(reach(fake, "172.30.0.41"), []);
  assertEquals(
    traceNft(fake, "IPv4", TABLE, { src: "10.180.5.5", dst: "172.30.0.41", port: 80, protocol: "tcp" }, [
      NODE_IP,
    ])
      .verdict,
    "none",
  );
});

Deno.test("nftables: a failed transaction keeps the previous rules, is counted, and the next sync is full", async () => {
  const { fake, proxier, metrics, log } = nftablesSetup();
  await proxier.syncNow();
  const before = fake.listTable("IPv4", TABLE);
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.11")]),
  );
  fake.failNext = "/dev/stdin:3:1: Error: Could not process rule: No buffer space available";
  await assertRejects(() => proxier.syncNow(), NftError);
  assertEquals(fake.listTable("IPv4", TABLE), before);
  assert((await metrics.registry.metrics()).includes(
    'kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"} 1',
  ));
  assertEquals(log.messages("error"), [
    "Sync failed; the previous rules stay in place and the next sync is full",
  ]);
  await proxier.syncNow();
  assert(
    fake.transactions.at(-1)!.startsWith('add table ip kube-proxy { comment "rules for kube-proxy" ; }\n'),
    "after a failure the sync is full",
  );
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.11:80"]);
});

Deno.test("nftables: a partial sync whose nft fails outright is a failed sync, not drift", async () => {
  const fake = new FakeNft();
  let broken = false;
  const real = fake.forFamily("IPv4");
  const nft: NFTables = {
    ...real,
    apply: (script, signal) =>
      broken ? Promise.reject(new NftError("nft -f - exited 1: broken", 1)) : real.apply(script, signal),
    listChains: (table) =>
      broken ? Promise.reject(new Error("nft -j list chains ip exited 1: broken")) : real.listChains(table),
  };
  const { proxier, log } = nftablesSetup({ nft });
  await proxier.syncNow();
  broken = true;
  proxier.onServiceDelete(makeService("ns5", "svc5"));
  await assertRejects(() => proxier.syncNow(), NftError);
  assertEquals(log.records.filter((r) => r.level === "warn").map((r) => r.msg), []);
  assertEquals(log.messages("error"), [
    "Sync failed; the previous rules stay in place and the next sync is full",
  ]);
});

Deno.test("nftables: a flushed ruleset is recreated by the next sync; a foreign kube-proxy table is replaced", async () => {
  const { fake, proxier, log } = nftablesSetup();
  await proxier.syncNow();
  fake.flushRuleset();
  proxier.onServiceDelete(makeService("ns5", "svc5"));
  await proxier.syncNow();
  assertEquals(
    log.records.filter((r) => r.level === "warn").map((r) => [r.msg, r.fields?.drift]),
    [[
      "Rules changed outside the proxy; doing a full sync",
      "the kube-proxy table is gone (ruleset flushed?)",
    ]],
    "says why it resyncs",
  );
  // The partial transaction that met the vanished table is no failed sync: the drift explains it.
  assertEquals(log.messages("error"), []);
  assertEquals(reach(fake, "172.30.0.42"), ["10.180.0.2:80", "10.180.0.3:80"]);
  // Upstream's nftables mode left a table of the same name: replaced, not merged.
  const other = emptyNftablesSetup();
  await other.fake.apply(
    "add table ip kube-proxy\nadd chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80\nadd set ip kube-proxy cluster-ips { type ipv4_addr; }\n",
  );
  await other.proxier.syncNow();
  const chains = other.fake.listChains("IPv4", TABLE)!;
  assert(
    chains.includes(LAYOUT_MARKER) && !chains.includes("service-ULMVA6XW-ns1/svc1/tcp/p80"),
    chains.join(" "),
  );
  // Upstream started over ours between two syncs: the next partial transaction fails whole on it,
  // and the check that follows names it; the full sync replaces it.
  fake.flushRuleset();
  await fake.apply("add table ip kube-proxy\nadd chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80\n");
  proxier.onServiceDelete(makeService("ns6", "svc6"));
  await proxier.syncNow();
  assertMatch(
    String(log.records.filter((r) => r.level === "warn").at(-1)?.fields?.drift),
    /^another writer changed the kube-proxy table: /,
  );
  assertEquals(log.messages("error"), []);
  assert(fake.listChains("IPv4", TABLE)!.includes(LAYOUT_MARKER), "ours again");
  assertEquals(reach(fake, "172.30.0.42"), ["10.180.0.2:80", "10.180.0.3:80"]);
});

Deno.test("nftables: a change whose partial sync met drift is applied by the full sync that repairs it, and its programming latency observed", async () => {
  const { fake, proxier, metrics } = nftablesSetup();
  await proxier.syncNow();
  const observed = async () =>
    Number(
      /^kubeproxy_network_programming_duration_seconds_count\{ip_family="IPv4"\} (\d+)$/m.exec(
        await metrics.registry.metrics(),
      )?.[1] ?? 0,
    );
  const before = await observed();
  fake.flushRuleset();
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (s) => {
      s.endpoints = [ep("10.180.0.1"), ep("10.180.0.10")];
      s.metadata!.annotations = {
        "endpoints.kubernetes.io/last-change-trigger-time": new Date().toISOString(),
      };
    }),
  );
  await proxier.syncNow();
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.10:80", "10.180.0.1:80"]);
  assertEquals(await observed(), before + 1);
});

Deno.test("nftables: an lb chain no service needs is deleted a second later, in its own transaction", async () => {
  const { fake, proxier, clock } = nftablesSetup();
  await proxier.syncNow();
  const big = Array.from({ length: 40 }, (_, i) => ep(`10.180.7.${i + 1}`));
  proxier.onServiceAdd(makeService("ns8", "big", (s) => s.spec!.clusterIPs = ["172.30.8.8"]));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns8", "big", (s) => s.endpoints = big));
  await proxier.syncNow();
  assert(fake.listChains("IPv4", TABLE)!.includes("lb-40"));
  assertEquals(reach(fake, "172.30.8.8").length, 40);
  proxier.onServiceDelete(makeService("ns8", "big"));
  await proxier.syncNow();
  assert(fake.listChains("IPv4", TABLE)!.includes("lb-40"), "kept while a deleted element may still hold it");
  await clock.advance(1000);
  proxier.onServiceDelete(makeService("ns1", "svc1"));
  await proxier.syncNow();
  assert(!fake.listChains("IPv4", TABLE)!.includes("lb-40"), "deleted once stale for a second");
  assert(fake.listChains("IPv4", TABLE)!.includes("lb-32"), "precreated counts stay");
  assert(fake.transactions.some((t) => t.includes("delete chain ip kube-proxy lb-40")));
});

Deno.test("nftables affinity: a pin to a removed endpoint is dropped; other pins stay", async () => {
  const { fake, proxier } = nftablesSetup();
  await proxier.syncNow();
  // ns3/svc3 has ClientIP affinity (100 s) over 10.180.0.4 and .5: pin two clients by tracing
  // with recording, as new connections would.
  const pin = (src: string) =>
    traceNft(fake, "IPv4", TABLE, { src, dst: "172.30.0.43", port: 80, protocol: "tcp" }, [NODE_IP], {
      record: true,
    });
  pin("10.180.5.5");
  pin("10.180.5.6");
  const pins = () =>
    fake.listElements("IPv4", TABLE, "affinity-100").map((e) => `${e.key[0]}->${e.value[0]}`);
  // Both paths recorded: each client holds the last branch's endpoint.
  assertEquals(pins(), ["10.180.5.5->10.180.0.5", "10.180.5.6->10.180.0.5"]);
  assertEquals(
    traceNft(fake, "IPv4", TABLE, { src: "10.180.5.5", dst: "172.30.0.43", port: 80, protocol: "tcp" }, [
      NODE_IP,
    ])
      .endpoints,
    ["10.180.0.5:80"],
    "a pinned client reaches only its endpoint",
  );
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns3", "svc3"),
    makeEndpointSlice("ns3", "svc3", (s) => s.endpoints = [ep("10.180.0.4"), ep("10.180.0.6")]),
  );
  await proxier.syncNow();
  assertEquals(pins(), [], "pins to 10.180.0.5 are gone");
  assertEquals(
    traceNft(fake, "IPv4", TABLE, { src: "10.180.5.5", dst: "172.30.0.43", port: 80, protocol: "tcp" }, [
      NODE_IP,
    ])
      .endpoints,
    ["10.180.0.4:80", "10.180.0.6:80"],
  );
  // A pin to an endpoint the next change keeps stays.
  pin("10.180.5.7");
  assertEquals(pins(), ["10.180.5.7->10.180.0.6"]);
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns3", "svc3", (s) => s.endpoints = [ep("10.180.0.4"), ep("10.180.0.6")]),
    makeEndpointSlice("ns3", "svc3", (s) => s.endpoints = [ep("10.180.0.6"), ep("10.180.0.7")]),
  );
  await proxier.syncNow();
  assertEquals(pins(), ["10.180.5.7->10.180.0.6"]);
});

Deno.test("nftables: two services on one external IP and port: the first keeps it, the second takes over", async () => {
  const { fake, proxier, log } = emptyNftablesSetup();
  const svc = (name: string, ip: string) =>
    makeService("ns1", name, (s) => {
      s.spec!.clusterIPs = [ip];
      s.spec!.externalIPs = ["192.168.99.5"];
    });
  proxier.onServiceAdd(svc("a", "172.30.0.1"));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "a", (s) => s.endpoints = [ep("10.180.0.1")]));
  proxier.onServiceAdd(svc("b", "172.30.0.2"));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "b", (s) => s.endpoints = [ep("10.180.0.2")]));
  await proxier.syncNow();
  assert(log.messages("warn").includes("Two services claim the same address and port; the first keeps it"));
  assertEquals(reach(fake, "192.168.99.5", "192.168.0.10"), ["10.180.0.1:80"]);
  proxier.onServiceDelete(svc("a", "172.30.0.1"));
  await proxier.syncNow();
  assertEquals(reach(fake, "192.168.99.5", "192.168.0.10"), ["10.180.0.2:80"]);
});

const HOSTILE = [
  "a b",
  'x" ; flush ruleset ; "',
  "x\nflush ruleset",
  "} ; flush ruleset ; {",
  "@hostile-set",
  "x".repeat(5000),
  "10.0.0.1 . tcp . 80 : goto internal",
];

Deno.test("nftables: no object field reaches the transaction unvalidated", async () => {
  const { fake, proxier, log } = emptyNftablesSetup();
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
      s.spec!.externalIPs = [h];
      s.spec!.type = "LoadBalancer";
      s.spec!.loadBalancerSourceRanges = [h];
      s.status = { loadBalancer: { ingress: [{ ip: h }] } };
    }));
    proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", `ann${i}`, (s) => {
      s.endpoints = [{ addresses: [h], nodeName: h, hints: { forZones: [{ name: h }] } }];
    }));
    proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", `slice${i}`, (s) => {
      s.metadata!.labels = { "kubernetes.io/service-name": "good" };
      s.ports = [{ name: h, port: 80, protocol: "TCP" }];
    }));
  }
  await proxier.syncNow();
  const tx = fake.transactions.at(-1)!;
  for (const h of HOSTILE) {
    assert(!tx.includes(h), `hostile ${JSON.stringify(h.slice(0, 20))} reached the transaction`);
  }
  assert(!tx.includes("flush ruleset"), tx);
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.1:80"], "the good service works");
  assert(log.messages("warn").length >= HOSTILE.length * 4, "each bad object or field is warned about");
});

Deno.test("nftables IPv6: the IPv6 half of dual-stack objects; affinity left out (with a warning) when unsupported", async () => {
  const { fake, proxier, log } = emptyNftablesSetup({
    family: "IPv6",
    nodeIPs: ["fd00:0:2::2"],
    localDetection: { mode: "ClusterCIDR", clusterCIDRs: ["fd00:180::/64"] },
    affinitySupported: false,
    portNotice: affinityNotice("IPv6", "nftables v1.0.6 (Lester Gooch #5)"),
  });
  proxier.onServiceAdd(makeService("ns1", "svc1", (s) => {
    s.spec!.clusterIPs = ["172.30.0.41", "fd00:30::41"];
    s.spec!.sessionAffinity = "ClientIP";
    s.spec!.type = "NodePort";
    s.spec!.ports![0].nodePort = 30080;
  }));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => {
    s.metadata!.name = "svc1-v6";
    s.addressType = "IPv6";
    s.endpoints = [ep("fd00:180::1"), ep("fd00:180::2")];
  }));
  await proxier.syncNow();
  const tx = fake.transactions.at(-1)!;
  assert(tx.includes("fd00:30::41 . tcp . 80") && !tx.includes("172.30.0.41"), tx);
  assert(!tx.includes("affinity-10800"), "no affinity map");
  // Said once, on the Service, with why and what takes it.
  assertEquals(log.messages("warn").filter((m) => m.includes("sessionAffinity")), [
    'Service "ns1/svc1": sessionAffinity ClientIP is not programmed for IPv6: nftables v1.0.6 (Lester Gooch #5) ' +
    "aborts on the affinity map's update rule (nft 1.1.3 takes it; this program's image has it); new " +
    "connections are balanced without affinity",
  ]);
  const r = traceNft(fake, "IPv6", TABLE, {
    src: "fd00:99::9",
    dst: "fd00:0:2::2",
    port: 30080,
    protocol: "tcp",
  }, [
    "fd00:0:2::2",
  ]);
  assertEquals([r.endpoints, r.masq], [["[fd00:180::1]:80", "[fd00:180::2]:80"], true]);
});

Deno.test("nftables detect-local-mode by interface: iifname decides masquerading; liberal conntrack keeps INVALID packets", async () => {
  for (
    const [localDetection, local, match] of [
      [{ mode: "BridgeInterface", clusterCIDRs: [], bridgeInterface: "cbr0" }, "cbr0", 'iifname != "cbr0"'],
      [
        { mode: "InterfaceNamePrefix", clusterCIDRs: [], interfaceNamePrefix: "veth" },
        "veth9",
        'iifname != "veth*"',
      ],
    ] as const
  ) {
    const { fake, proxier } = nftablesSetup({ localDetection });
    await proxier.syncNow();
    assert(
      fake.transactions.at(-1)!.includes(`add rule ip kube-proxy internal ${match} jump mark-for-masquerade`),
    );
    const masq = (inInterface: string) =>
      traceNft(fake, "IPv4", TABLE, {
        src: "10.180.0.9",
        dst: "172.30.0.41",
        port: 80,
        protocol: "tcp",
        inInterface,
      }, [
        NODE_IP,
      ]).masq;
    assertEquals([masq(local), masq("eth0")], [false, true], localDetection.mode);
  }
});

Deno.test("nftables: no rule drops a packet conntrack finds INVALID, as upstream's nftables mode", async () => {
  const { fake, proxier } = nftablesSetup();
  await proxier.syncNow();
  assert(!/\binvalid\b.*drop/.test(fake.transactions.at(-1)!), fake.transactions.at(-1)!);
  // Upstream 1.36.2's own listing holds none either.
  const upstream = await Deno.readTextFile(
    new URL("../../tests/testdata/upstream-1.36/nftables-mode.nft", import.meta.url),
  );
  assert(!/ct state invalid/.test(upstream));
});

const UPSTREAM_SVC1 = {
  namespace: "ns1",
  name: "svc1",
  portName: "p80",
  clusterIP: "172.30.0.41",
  port: 80,
  targetPort: 80,
  endpoints: ["10.180.0.99"],
};

Deno.test("nftables hand-over: upstream's first sync over our table leaves none of our chains hooked; our next start replaces its table whole", async () => {
  const { fake, proxier } = nftablesSetup();
  await proxier.syncNow();
  await fake.apply(upstreamNftablesSync([UPSTREAM_SVC1], "10.180.0.0/16"));
  // Upstream rewrote every base chain (they share its names): only its rules are hooked.
  const table = fake.table("IPv4", TABLE)!;
  const hooked = [...table.chains].filter(([, c]) => c.base !== undefined).flatMap(([, c]) => c.rules).join(
    "\n",
  );
  for (const ours of ["affinity-record", "internal", "lb"]) assert(!hooked.includes(ours), hooked);
  assertEquals(table.sets.get("service-ips")!.elements.size, 1, "upstream's one service");

  const again = nftablesSetup({ nft: fake.forFamily("IPv4") });
  await again.proxier.syncNow();
  assertEquals(lines(fake.transactions.at(-1)!).slice(0, 3), [
    "add table ip kube-proxy",
    "delete table ip kube-proxy",
    'add table ip kube-proxy { comment "rules for kube-proxy" ; }',
  ]);
  assertEquals(
    fake.listChains("IPv4", TABLE)!.filter((c) => c.includes("/")),
    [],
    "upstream's service chains went",
  );
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.1:80"]);
  assertEquals(
    again.log.records.filter((r) => r.msg.startsWith("Replacing")).map((r) => r.fields?.reason),
    ["chain nodeport-endpoints-check is not one of this layout's"],
  );
  // Restarted over its own table, it updates in place.
  const third = nftablesSetup({ nft: fake.forFamily("IPv4") });
  await third.proxier.syncNow();
  assert(!fake.transactions.at(-1)!.includes("delete table"), "its own table is kept");
});

Deno.test("nftables hand-over: a table holding our marker whose chain another writer hooked elsewhere is replaced, not refused", async () => {
  const { fake, proxier } = nftablesSetup();
  // As a writer whose filter-input sits at another priority leaves it: the kernel refuses to move
  // a base chain (EOPNOTSUPP), so adding ours beside it fails every sync unless the table goes.
  await fake.apply(
    `add table ip kube-proxy\nadd chain ip kube-proxy ${LAYOUT_MARKER}\n` +
      "add chain ip kube-proxy filter-input { type filter hook input priority -110; policy accept; }\n",
  );
  await proxier.syncNow();
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.1:80"]);
  const input = fake.table("IPv4", TABLE)!.chains.get("filter-input")!;
  assertEquals(input.base, "type filter hook input priority filter; policy accept;");
});

Deno.test("nftables: a transaction another instance of this program wrote is named in the drift, said and counted apart", async () => {
  const { fake, proxier, log, metrics } = nftablesSetup({ writer: "nftables/aaaaaaaa pid 1" });
  await proxier.syncNow();
  assert(
    fake.transactions[0].includes(
      'sync-generation { 0x00000001 comment "kube-proxy-deno nftables/aaaaaaaa pid 1" }',
    ),
  );
  assertEquals(await proxier.checkDrift(), undefined, "its own element is no drift");
  // A second proxy on the node (one that skipped the node's lock) writes its transaction.
  await fake.apply(
    'flush set ip kube-proxy sync-generation\nadd element ip kube-proxy sync-generation { 0x00000007 comment "kube-proxy-deno nftables/bbbbbbbb pid 2" }\n',
  );
  assertEquals(
    await proxier.repairDrift(),
    "another writer programs this node: kube-proxy-deno nftables/bbbbbbbb pid 2 wrote transaction 7",
  );
  assertEquals(log.messages("warn"), [
    "Another writer programs this node's rules; rewriting them (one proxy per node)",
  ]);
  assertMatch(
    await metrics.registry.metrics(),
    /kubeproxy_sync_proxy_rules_other_writer_repairs_total\{ip_family="IPv4"\} 1/,
  );
});

/** The nft interface of `fake` that records each call's name (and, for a transaction, its lines). */
function recordingNft(fake: Fake, calls: string[]): NFTables {
  const nft = fake.forFamily("IPv4");
  return new Proxy(nft, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        calls.push(
          key === "apply"
            ? `apply ${String(args[0]).split("\n").filter((l) => l !== "").length}`
            : key === "listElements"
            ? `listElements ${String(args[1])}`
            : key === "refusals"
            ? `refusals of ${serviceIPKeys(String(args[0]))} service-ips keys`
            : String(key),
        );
        return v.apply(target, args);
      };
    },
  });
}

/** How many `service-ips` keys `script`'s `delete element` statements name. */
function serviceIPKeys(script: string): number {
  return script.split("\n").filter((l) => l.startsWith(`delete element ip ${TABLE} ${SERVICE_IPS} `))
    .reduce((n, l) => n + l.split(",").length, 0);
}

/**
 * Adds Services `scale/s0` .. `s{n-1}` (cluster IP 172.31.x.y, `tweak` applied) with one endpoint each
 * (10.181.x.y).
 */
function addScaleServices(
  proxier: ReturnType<typeof nftablesSetup>["proxier"],
  n: number,
  tweak: (s: ReturnType<typeof makeService>, i: number) => void = () => {},
): void {
  for (let i = 0; i < n; i++) {
    const ip = `172.31.${i >> 8}.${i & 255}`;
    proxier.onServiceAdd(makeService("scale", `s${i}`, (s) => {
      s.spec!.clusterIP = ip;
      s.spec!.clusterIPs = [ip];
      tweak(s, i);
    }));
    proxier.onEndpointSliceAdd(
      makeEndpointSlice("scale", `s${i}`, (s) => s.endpoints = [ep(`10.181.${i >> 8}.${i & 255}`)]),
    );
  }
}

/** A proxier synced with `n` Services of one endpoint each; `calls` records what it asks nft from then on. */
async function syncedAtScale(n: number) {
  const calls: string[] = [];
  const fake = new FakeNft();
  const { proxier } = nftablesSetup({ nft: recordingNft(fake, calls) });
  addScaleServices(proxier, n);
  await proxier.syncNow();
  calls.length = 0;
  return { proxier, calls, held: () => fake.listElements("IPv4", TABLE, SERVICE_IPS).length };
}

Deno.test("nftables at scale: a partial sync asks nft for one transaction the size of the change and nothing else, whatever the table holds", async () => {
  const asked = new Map<number, string[]>();
  for (const n of [50, 2000]) {
    const { proxier, calls } = await syncedAtScale(n);
    for (let g = 1; g <= 5; g++) {
      const before = makeEndpointSlice(
        "scale",
        "s7",
        (s) => s.endpoints = [ep(`10.181.0.${g === 1 ? 7 : 100 + g - 1}`)],
      );
      proxier.onEndpointSliceUpdate(
        before,
        makeEndpointSlice("scale", "s7", (s) => s.endpoints = [ep(`10.181.0.${100 + g}`)]),
      );
      await proxier.syncNow();
    }
    // Nothing that reads the table (nft fetches every element to list a map or a chain's rules); the
    // transaction itself fails on a table gone or another layout, and only then is the table checked.
    assert(calls.every((c) => c.startsWith("apply ")), calls.join(", "));
    asked.set(n, calls);
  }
  assertEquals(asked.get(2000), asked.get(50), "the same calls and transaction sizes at 40 times the table");
});

Deno.test("nftables at scale: a thorough drift check is one chain listing and one check of at most a window of keys, whatever the table holds", async () => {
  for (const n of [50, 2000]) {
    const { proxier, calls, held } = await syncedAtScale(n);
    assertEquals(await proxier.checkDrift(), undefined);
    // Listing a map or a chain's rules makes nft fetch its (or the table's) elements: seconds at scale.
    assertEquals(calls, [
      "listChains",
      `refusals of ${Math.min(held(), SERVICE_IPS_WINDOW)} service-ips keys`,
    ]);
    assert(held() > n, `${held()} elements`);
  }
  assert(SERVICE_IPS_WINDOW < 50_000, "a check names a bounded window of keys, not every one");
});

Deno.test("nftables: a service-ips element deleted by hand is found wherever it sits, the windows going round the map", async () => {
  const fake = new FakeNft();
  const { proxier } = nftablesSetup({ nft: fake.forFamily("IPv4") });
  for (let i = 0; i < 12; i++) {
    const ip = `172.31.0.${i}`;
    proxier.onServiceAdd(
      makeService("w", `s${i}`, (s) => (s.spec!.clusterIP = ip, s.spec!.clusterIPs = [ip])),
    );
    proxier.onEndpointSliceAdd(makeEndpointSlice("w", `s${i}`, (s) => s.endpoints = [ep(`10.181.0.${i}`)]));
  }
  await proxier.syncNow();
  const keys = fake.listElements("IPv4", TABLE, SERVICE_IPS).map((e) => e.key.join(" . "));
  assert(keys.length >= 12, keys.join(", "));
  for (const key of keys) {
    await fake.apply(`delete element ip ${TABLE} ${SERVICE_IPS} { ${key} }\n`);
    assertEquals(
      await proxier.repairDrift(),
      `map ${SERVICE_IPS} lacks ${key}, which the last sync wrote (Could not process rule: No such file or directory: ${SERVICE_IPS} ${key})`,
    );
    await proxier.syncNow();
    assertEquals(await proxier.checkDrift(), undefined, `${key} written again`);
  }
});

/** An nft call that runs as long as it is let run (seconds at scale), until its signal kills it. */
function stalled(): {
  runs: { started: number; stopped: number };
  call: (signal?: AbortSignal) => Promise<never>;
} {
  const runs = { started: 0, stopped: 0 };
  const call = (signal?: AbortSignal) =>
    new Promise<never>((_, reject) => {
      runs.started++;
      signal?.addEventListener("abort", () => (runs.stopped++, reject(new Error("nft killed"))));
    });
  return { runs, call };
}

/**
 * Starts a thorough drift check through `nft` (over `fake`; `before` runs after the first sync), asks
 * for a sync while the stalled call runs, and checks that the check gave way and the change went in.
 */
async function assertGivesWay(
  fake: FakeNft,
  nft: NFTables,
  runs: { started: number; stopped: number },
  before: () => Promise<void> = () => Promise.resolve(),
): Promise<void> {
  const { proxier } = nftablesSetup({ nft });
  await proxier.syncNow();
  await before();
  const checking = proxier.repairDrift();
  await new Promise((r) => setTimeout(r, 20));
  assertEquals(runs.started, 1, "the check's nft runs");
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1"), ep("10.180.0.77")]),
  );
  await proxier.syncNow();
  assertEquals(runs.stopped, 1, "its nft was stopped for the sync");
  assertEquals(await checking, undefined, "a check cut short reports no drift");
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.1:80", "10.180.0.77:80"], "the change is in");
}

Deno.test("nftables: a thorough drift check gives way to a sync asked for while its nft -c runs", async () => {
  const fake = new FakeNft();
  const { runs, call } = stalled();
  await assertGivesWay(
    fake,
    { ...fake.forFamily("IPv4"), refusals: (_script, signal) => call(signal) },
    runs,
  );
});

Deno.test("nftables: a thorough drift check gives way to a sync asked for while it lists the table", async () => {
  const fake = new FakeNft();
  const { runs, call } = stalled();
  const nft: NFTables = {
    ...fake.forFamily("IPv4"),
    listElements: (table, name, signal) =>
      name !== "sync-generation" ? fake.forFamily("IPv4").listElements(table, name) : call(signal),
  };
  // The generation element gone: the check lists the set to name who wrote the table.
  await assertGivesWay(fake, nft, runs, () => fake.apply(`flush set ip ${TABLE} sync-generation\n`));
});

Deno.test("nftables: a full build collects within itself once the heap grew (what the lists left, before any transaction)", async () => {
  const ran: string[] = [];
  // Each reading finds the heap 16 MiB larger (one every 256 ports): 1,280 ports in, the build collects.
  let reads = 0;
  const memory = new SyncMemory({
    now: () => 0,
    heapUsed: () => 16 * 2 ** 20 * reads++,
    ordinary: () => ran.push("collect"),
    thorough: () => ran.push("thorough"),
    ifDue: () => ran.push("ifDue"),
    trim: () => {},
  });
  const fake = new FakeNft();
  const nft = fake.forFamily("IPv4");
  const { proxier } = nftablesSetup({
    memory,
    nft: { ...nft, apply: (script, signal) => (ran.push("apply"), nft.apply(script, signal)) },
  });
  for (let i = 0; i < 1500; i++) {
    const ip = `172.31.${i >> 8}.${i & 255}`;
    proxier.onServiceAdd(
      makeService("w", `s${i}`, (s) => (s.spec!.clusterIP = ip, s.spec!.clusterIPs = [ip])),
    );
  }
  await proxier.syncNow();
  assertEquals(ran.slice(0, 2), ["collect", "apply"]);
  assertEquals(ran.filter((r) => r === "collect").length, 1, ran.join(" "));
  assertEquals(ran.at(-1), "thorough");
});

Deno.test("nftables: a new table sure to fill more than a part sends its layout, then collects what the lists left, before its first part", async () => {
  const ran: string[] = [];
  // The heap grows 128 MiB between readings: the first reading in the build already collects.
  let reads = 0;
  const memory = new SyncMemory({
    now: () => 0,
    heapUsed: () => 128 * 2 ** 20 * reads++,
    ordinary: () => ran.push("collect"),
    thorough: () => ran.push("thorough"),
    ifDue: () => ran.push("ifDue"),
    trim: () => {},
  });
  const fake = new FakeNft();
  const nft = fake.forFamily("IPv4");
  const { proxier } = emptyNftablesSetup({
    memory,
    // Parts of 8 statements, the first of one: 6,000 Services are sure to fill more than one.
    freshChunkStatements: 8,
    nft: {
      ...nft,
      apply: (
        script,
        signal,
      ) => (ran.push(`apply ${scriptText(script).slice(0, 9)}`), nft.apply(script, signal)),
    },
  });
  addScaleServices(proxier, 6000);
  await proxier.syncNow();
  const collect = ran.indexOf("collect");
  assert(collect > 0, ran.join(" "));
  assertEquals(ran.slice(0, collect), ["apply add table"], "the layout alone went before it");
  assert(ran.slice(collect).filter((r) => r === "apply add eleme").length > 1, ran.join(" "));
  assertEquals(reach(fake, "172.31.11.183"), ["10.181.11.183:80"]);
});

const CONFLICT = "Two services claim the same address and port; the first keeps it";

/**
 * A proxier on a new table with `n` Services of one endpoint each, then two that claim one external
 * IP and port (their keys sort last: the build warns of them at its end). Its transactions are
 * recorded in order, each with whether the build had reached its end when it was applied.
 */
function newTableAtScale(n: number, freshChunkStatements?: number) {
  const fake = new FakeNft();
  const nft = fake.forFamily("IPv4");
  const applied: Array<{ text: string; buildEnded: boolean }> = [];
  const { proxier, log } = emptyNftablesSetup({
    freshChunkStatements,
    nft: {
      ...nft,
      apply(script, signal) {
        applied.push({ text: scriptText(script), buildEnded: log.messages("warn").includes(CONFLICT) });
        return nft.apply(script, signal);
      },
    },
  });
  addScaleServices(proxier, n);
  for (const [name, ip] of [["a", "172.30.0.1"], ["b", "172.30.0.2"]]) {
    proxier.onServiceAdd(makeService("zz", name, (s) => {
      s.spec!.clusterIPs = [ip];
      s.spec!.externalIPs = ["192.168.99.5"];
    }));
    proxier.onEndpointSliceAdd(
      makeEndpointSlice("zz", name, (s) => s.endpoints = [ep(ip.replace("172.30", "10.182"))]),
    );
  }
  return { fake, proxier, applied };
}

Deno.test("nftables: a new table's build hands its finished elements to the kernel before it ends, backends too when every lb chain is precreated; the table ends as one transaction leaves it", async () => {
  const streamed = newTableAtScale(3000, 2);
  await streamed.proxier.syncNow();
  const { applied } = streamed;
  const before = (container: string) =>
    applied.some((t) => !t.buildEnded && t.text.includes(`add element ip ${TABLE} ${container} `));
  const order = applied.map((t) => `${t.buildEnded} ${t.text.slice(0, 60)}`).join("\n");
  for (const c of ["cluster-ips", "service-ips", "lb", "backends"]) assert(before(c), `${c}:\n${order}`);
  // The layout went first, with the backends map and its precreated lb chains; no hooked chain's
  // rule before every element is in.
  assert(
    applied[0].text.includes(`add map ip ${TABLE} backends `) && !applied[0].text.includes("add element"),
  );
  assert(!applied.slice(0, -1).some((t) => t.text.includes("jump services")));
  assert(applied.at(-1)!.text.includes("jump services"));
  assertEquals(reach(streamed.fake, "172.31.11.183"), ["10.181.11.183:80"]);
  assertEquals(reach(streamed.fake, "192.168.99.5", "192.168.0.10"), ["10.182.0.1:80"]);

  // The same objects in one transaction (its elements fit one part).
  const whole = newTableAtScale(3000);
  await whole.proxier.syncNow();
  assertEquals(whole.applied.filter((t) => t.text.includes("add element")).length, 1);
  assertEquals(streamed.fake.listTable("IPv4", TABLE), whole.fake.listTable("IPv4", TABLE));
});

Deno.test("nftables: a new table whose ports may need an lb chain not precreated streams what it can and creates the backends map once every port is built", async () => {
  const streamed = newTableAtScale(3000, 2);
  // 33 endpoints: an lb-33 chain, which only the build's end knows to create with the map.
  streamed.proxier.onEndpointSliceUpdate(
    makeEndpointSlice("scale", "s7"),
    makeEndpointSlice(
      "scale",
      "s7",
      (s) => s.endpoints = Array.from({ length: 33 }, (_, k) => ep(`10.183.0.${k + 1}`)),
    ),
  );
  await streamed.proxier.syncNow();
  const { applied } = streamed;
  const map = applied.findIndex((t) => t.text.includes(`add map ip ${TABLE} backends `));
  assert(map > 0 && applied[map].buildEnded, "the backends map comes with the build's end");
  assert(applied.some((t) => !t.buildEnded && t.text.includes(`add element ip ${TABLE} cluster-ips `)));
  assert(!applied.slice(0, map).some((t) => t.text.includes(`add element ip ${TABLE} backends `)));
  assert(applied[map].text.includes(`add chain ip ${TABLE} lb-33`));
  assertEquals(
    traceNft(streamed.fake, "IPv4", TABLE, {
      src: "10.180.5.5",
      dst: "172.31.0.7",
      port: 80,
      protocol: "tcp",
    }, [NODE_IP]).endpoints.length,
    33,
  );
});

Deno.test("nftables: a new table's build that fails after its load began stops the load: no nft of it runs once the sync has failed", async () => {
  const fake = new FakeNft();
  const inner = fake.forFamily("IPv4");
  let running = 0;
  const { proxier } = nftablesSetup({
    freshChunkStatements: 2,
    maglevTableSize: 1021,
    nft: {
      ...inner,
      async apply(script, signal) {
        const text = scriptText(script);
        running++;
        try {
          // The Maglev table, written once every port is built, is refused; a part of cluster IPs
          // takes its time (until stopped).
          if (text.includes(" mh-")) throw new NftError("nft -f - exited 1: Error: refused", 1);
          if (text.includes(`add element ip ${TABLE} cluster-ips `)) {
            await new Promise<void>((resolve) => {
              const t = setTimeout(resolve, 5000);
              signal?.addEventListener("abort", () => (clearTimeout(t), resolve()));
            });
          }
          if (signal?.aborted === true) throw new NftError("nft -f - exited 137: stopped", 137);
          return await inner.apply(text);
        } finally {
          running--;
        }
      },
    },
  }, { objects: EMPTY });
  addScaleServices(proxier, 3000, (s, i) => {
    if (i === 0) s.metadata!.annotations = { "kube-router.io/service.scheduler": "mh" };
  });
  const started = Date.now();
  const error = await assertRejects(() => proxier.syncNow(), NftError);
  assert(error.message.includes("refused"), error.message);
  assertEquals(running, 0, "an nft of the load still runs");
  assert(Date.now() - started < 4000, "the part was stopped, not waited for");
});

Deno.test("nftables: a slice relabelled for another Service leaves the one it named; deleted, it leaves both", async () => {
  const { fake, proxier } = nftablesSetup();
  // A second Service in svc1's namespace, with a slice of its own.
  proxier.onServiceAdd(makeService("ns1", "svc9", (s) => s.spec!.clusterIPs = ["172.30.0.60"]));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc9", (s) => s.endpoints = [ep("10.180.0.9")]));
  await proxier.syncNow();
  assertEquals(reach(fake, "172.30.0.41"), ["10.180.0.1:80"]);
  assertEquals(reach(fake, "172.30.0.60"), ["10.180.0.9:80"]);
  // svc1's slice now names svc9 (a label is mutable: another writer may change it).
  const relabelled = makeEndpointSlice("ns1", "svc1", (s) => {
    s.metadata!.labels = { "kubernetes.io/service-name": "svc9" };
    s.endpoints = [ep("10.180.0.1")];
  });
  proxier.onEndpointSliceUpdate(makeEndpointSlice("ns1", "svc1"), relabelled);
  await proxier.syncNow();
  assertEquals(reach(fake, "172.30.0.41"), [], "svc1 no longer reaches what its slice listed");
  assertEquals(reach(fake, "172.30.0.60"), ["10.180.0.1:80", "10.180.0.9:80"]);
  proxier.onEndpointSliceDelete(relabelled);
  await proxier.syncNow();
  assertEquals(reach(fake, "172.30.0.41"), []);
  assertEquals(reach(fake, "172.30.0.60"), ["10.180.0.9:80"]);
});
