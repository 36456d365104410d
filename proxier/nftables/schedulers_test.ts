import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ep, makeEndpointSlice, makeService } from "../../tests/support/fixtures.ts";
import { nftablesSetup } from "../../tests/flows/nftables_datapath.ts";
import { NODE_A, NODE_IP, type ObjectSet } from "../../tests/flows/objects.ts";
import { ipBytes } from "../../iptables/ip.ts";
import { nftJhash, portBytes } from "../../loadbalancer/jhash.ts";
import { DEFAULT_MAGLEV_SEED, DEFAULT_MAGLEV_TABLE_SIZE, maglevTable } from "../../loadbalancer/maglev.ts";
import { type NftTraceResult, traceNft } from "../trace/nft_walker.ts";
import { TABLE } from "./layout.ts";
import { settle } from "../runtime/clock.ts";

/** A Service of `scheduler` (flags `flags`) at 172.30.7.1 with `eps`, in the order given. */
function objects(scheduler: string, eps: string[], flags?: string): ObjectSet {
  return {
    id: `sched-${scheduler}-${flags}-${eps.join()}`,
    build: () => ({
      services: [makeService("ns", "web", (s) => {
        s.spec!.clusterIPs = ["172.30.7.1"];
        s.metadata!.annotations = {
          "kube-router.io/service.scheduler": scheduler,
          ...(flags === undefined ? {} : { "kube-router.io/service.schedflags": flags }),
        };
      })],
      slices: [makeEndpointSlice("ns", "web", (x) => x.endpoints = eps.map((ip) => ep(ip)))],
    }),
  };
}

const EPS = Array.from({ length: 10 }, (_, i) => `10.180.7.${i + 1}`);
const CLIENTS = Array.from(
  { length: 200 },
  (_, i) => ({ src: `10.50.${i >> 4}.${(i * 7) % 250 + 1}`, sport: 20000 + i * 131 }),
);

/** Where a new TCP connection from `src` (source port `sport`) to the Service goes through `fake`'s rules. */
function toService(fake: Parameters<typeof traceNft>[0], src: string, sport?: number): NftTraceResult {
  return traceNft(fake, "IPv4", TABLE, { src, sport, dst: "172.30.7.1", port: 80, protocol: "tcp" }, [
    NODE_IP,
  ]);
}

/** The endpoint each client reaches through a node's rules; throws unless exactly one. */
async function picks(node: typeof NODE_A, o: ObjectSet): Promise<string[]> {
  const { fake, proxier } = nftablesSetup({}, { node, objects: o });
  await proxier.syncNow();
  return CLIENTS.map(({ src, sport }) => {
    const r = toService(fake, src, sport);
    if (r.endpoints.length !== 1) throw new Error(`${src}:${sport} reaches ${r.endpoints}`);
    return r.endpoints[0];
  });
}

/** The Maglev table of the Service (M 251, the default seed, the 5-tuple). */
const MH = "mh-internal/ns/web/p80/m251-s6b707264-5t";

const NODE_B = { ...NODE_A, id: "node-b", name: "node-b", ips: ["192.168.0.3"] };

Deno.test("nftables schedulers: sh and mh send each client to the same endpoint on two nodes, whatever order the endpoints came in", async () => {
  for (
    const [scheduler, flags] of [["sh", undefined], ["sh", "flag-2"], ["mh", undefined], ["mh", "flag-1"]]
  ) {
    const a = await picks(NODE_A, objects(scheduler!, EPS, flags));
    const b = await picks(NODE_B, objects(scheduler!, [...EPS].reverse(), flags));
    assertEquals(a, b, `${scheduler} ${flags}`);
    assert(
      new Set(a).size >= 8,
      `${scheduler} ${flags}: 200 clients spread over ${new Set(a).size} endpoints`,
    );
  }
});

Deno.test("nftables schedulers: the endpoint is the one the kernel's jhash picks (sorted endpoints for sh; the Maglev table's slot for mh)", async () => {
  const sorted = EPS.map((ip) => `${ip}:80`).sort();
  const table = maglevTable(sorted, DEFAULT_MAGLEV_TABLE_SIZE, DEFAULT_MAGLEV_SEED);
  const src = (c: { src: string }) => ipBytes(c.src)!;
  const cases: Array<[string, string | undefined, (c: (typeof CLIENTS)[number]) => string]> = [
    ["sh", undefined, (c) => sorted[nftJhash([src(c)], 10, DEFAULT_MAGLEV_SEED)]],
    ["sh", "flag-2", (c) => sorted[nftJhash([src(c), portBytes(c.sport)], 10, DEFAULT_MAGLEV_SEED)]],
    [
      "mh",
      undefined,
      (c) => table[nftJhash([src(c), portBytes(c.sport)], DEFAULT_MAGLEV_TABLE_SIZE, DEFAULT_MAGLEV_SEED)],
    ],
    ["mh", "flag-1", (c) => table[nftJhash([src(c)], DEFAULT_MAGLEV_TABLE_SIZE, DEFAULT_MAGLEV_SEED)]],
  ];
  for (const [scheduler, flags, expected] of cases) {
    assertEquals(
      await picks(NODE_A, objects(scheduler, EPS, flags)),
      CLIENTS.map(expected),
      `${scheduler} ${flags}`,
    );
  }
  // dh: every client of the address, one endpoint.
  assertEquals(new Set(await picks(NODE_A, objects("dh", EPS))).size, 1);
});

Deno.test("nftables schedulers: a Maglev Service scaled from 10 to 11 endpoints keeps most clients, and its sync writes only the moved slots", async () => {
  const { fake, proxier } = nftablesSetup({ maglevTableSize: 1021 }, { objects: objects("mh", EPS) });
  await proxier.syncNow();
  const reach = () =>
    CLIENTS.map(({ src, sport }) =>
      toService(fake, src, sport)
        .endpoints[0]
    );
  const before = reach();
  const eleven = [...EPS, "10.180.7.11"];
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns", "web"),
    makeEndpointSlice("ns", "web", (x) => x.endpoints = eleven.map((ip) => ep(ip))),
  );
  await proxier.syncNow();
  const after = reach();
  const kept = before.filter((e, i) => e === after[i]).length;
  // The new endpoint takes about 1/11 of the clients; Maglev moves few others.
  assert(kept >= 200 * (10 / 11 - 0.05), `${kept} of 200 clients kept their endpoint`);
  const tx = fake.transactions.at(-1)!;
  const added = tx.split("\n").filter((l) => l.startsWith("add element ip kube-proxy mh-internal/ns/web"));
  const slots = added.join(", ").split(" : ").length - 1;
  assert(slots > 0 && slots < 1021 * 0.15, `${slots} of 1021 slots rewritten`);
  assert(!tx.includes("add map"), "the table is updated in place");
  assert(
    tx.includes("delete element ip kube-proxy mh-internal/ns/web/p80/m1021-s6b707264-5t {"),
    tx.slice(0, 300),
  );
});

Deno.test("nftables schedulers: a Service leaving Maglev loses its chain and map a second later, in a sync of its own, with no other change", async () => {
  const { fake, proxier, clock } = nftablesSetup({ maglevTableSize: 251 }, {
    objects: objects("mh", EPS.slice(0, 3)),
  });
  const ac = new AbortController();
  const loop = proxier.syncLoop(ac.signal);
  try {
    await settle();
    assert(fake.listChains("IPv4", TABLE)!.includes(MH));
    proxier.onServiceUpdate(
      objects("mh", EPS.slice(0, 3)).build().services[0],
      objects("rr", EPS.slice(0, 3)).build().services[0],
    );
    await clock.advance(990);
    assert(fake.table("IPv4", TABLE)!.sets.has(MH), "kept while a deleted element may still point at it");
    await clock.advance(20);
    assert(!fake.table("IPv4", TABLE)!.sets.has(MH), "gone at the sync asked for, not the periodic one");
    assert(!fake.listChains("IPv4", TABLE)!.includes(MH));
  } finally {
    ac.abort();
    await loop;
  }
});

Deno.test("nftables schedulers: a Service leaving Maglev for rr loses its chain and map once unused; rr reaches every endpoint in turn", async () => {
  const { fake, proxier, clock } = nftablesSetup({ maglevTableSize: 251 }, {
    objects: objects("mh", EPS.slice(0, 3)),
  });
  await proxier.syncNow();
  assert(fake.listChains("IPv4", TABLE)!.includes(MH));
  const rr = objects("rr", EPS.slice(0, 3)).build().services[0];
  proxier.onServiceUpdate(objects("mh", EPS.slice(0, 3)).build().services[0], rr);
  await proxier.syncNow();
  assert(fake.listChains("IPv4", TABLE)!.includes("lb-rr-3"));
  const r = toService(fake, "10.50.0.1");
  assertEquals(r.endpoints, ["10.180.7.1:80", "10.180.7.2:80", "10.180.7.3:80"]);
  assertEquals(r.picks.map((p) => [p.chain, p.expr]), [["lb-rr-3", "numgen inc mod 3"]]);
  await clock.advance(2000);
  await proxier.syncNow();
  assert(!fake.listChains("IPv4", TABLE)!.includes(MH), "deleted once stale");
  assert(!fake.table("IPv4", TABLE)!.sets.has(MH));
});

Deno.test("nftables schedulers: a new Maglev table goes in a transaction of its own before the sync's; the hourly full sync keeps it; after the table vanished it is written whole", async () => {
  const { fake, proxier, clock } = nftablesSetup({ maglevTableSize: 251 }, { objects: objects("mh", EPS) });
  const slots = (tx: string) =>
    tx.split("\n").filter((l) => l.startsWith("add element ip kube-proxy mh-")).join(", ").split(" : ")
      .length - 1;
  await proxier.syncNow();
  assertEquals(fake.transactions.map(slots), [251, 0], "the table first, then the sync naming it");
  assert(
    fake.transactions[1].includes(`add element ip kube-proxy lb { 172.30.7.1 . tcp . 80 : goto ${MH} }`),
  );
  await clock.advance(3_600_000);
  await proxier.syncNow();
  const hourly = fake.transactions.at(-1)!;
  assert(hourly.includes("flush map ip kube-proxy lb"), "a full sync");
  assertEquals([fake.transactions.length, slots(hourly)], [3, 0], "nothing of the Maglev table rewritten");
  const r = toService(fake, "10.50.0.1");
  assertEquals(r.endpoints.length, 1, "still served through the kept table");
  fake.flushRuleset();
  // The periodic check finds it and asks for the full sync.
  assertEquals(await proxier.repairDrift(), "the kube-proxy table is gone (ruleset flushed?)");
  await proxier.syncNow();
  assertEquals(fake.transactions.slice(3).map(slots), [251, 0], "written whole again");
});

Deno.test("nftables schedulers: a restarted proxy reads its Maglev table back and rewrites none of it", async () => {
  const first = nftablesSetup({ maglevTableSize: 251 }, { objects: objects("mh", EPS) });
  await first.proxier.syncNow();
  // A new process over the same kernel (the fake's state carried over).
  const second = nftablesSetup({ maglevTableSize: 251 }, { objects: objects("mh", EPS) });
  await second.fake.apply(first.fake.transactions.join(""));
  const before = second.fake.transactions.length;
  await second.proxier.syncNow();
  const txs = second.fake.transactions.slice(before);
  assertEquals(txs.length, 1, "no table of its own");
  assert(!txs[0].includes(`element ip kube-proxy ${MH}`), "no slot written");
  assert(txs[0].includes(`goto ${MH}`));
});
