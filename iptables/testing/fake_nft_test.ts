import { ep, makeEndpointSlice, makeService } from "../../tests/support/fixtures.ts";
import { assert, assertEquals, assertMatch, assertRejects } from "../../tests/support/assert.ts";
import { nftablesSetup } from "../../tests/flows/nftables_datapath.ts";
import { TOPOLOGY } from "../../tests/flows/objects.ts";
import {
  commandWorks,
  netnsAvailable,
  NetnsSessionExecutor,
  withNamespace,
} from "../../tests/support/namespace.ts";
import { NftError, NftRunner } from "../nft.ts";
import { FakeNft, normalizeListing } from "./fake_nft.ts";

const BASE = `add table ip t
add chain ip t a
add chain ip t b { type filter hook input priority 0; policy accept; }
add map ip t m { type ipv4_addr : verdict; }
add rule ip t b ip daddr vmap @m
add element ip t m { 10.0.0.1 : goto a }
`;

Deno.test("FakeNft: a failing statement leaves the previous state, naming the line", async () => {
  const f = new FakeNft();
  await f.apply(BASE);
  const before = f.listTable("IPv4", "t");
  const e = await assertRejects(() => f.apply("add chain ip t c\nadd rule ip t c jump nowhere\n"), NftError);
  assertEquals([e.lineNumber, e.line], [2, "add rule ip t c jump nowhere"]);
  assertEquals(f.listTable("IPv4", "t"), before);
  assertEquals(f.listChains("IPv4", "t"), ["a", "b"], "chain c of the failed transaction is not there");
});

Deno.test("FakeNft: references hold chains and sets; elements behave as the kernel's", async () => {
  const f = new FakeNft();
  await f.apply(BASE);
  for (
    const [bad, why] of [
      ["delete chain ip t a", /referenced by map m/],
      ["delete map ip t m", /referenced by chain b/],
      ["add element ip t m { 10.0.0.1 : drop }", /File exists/],
      ["delete element ip t m { 10.0.0.9 }", /No such file/],
      ["add element ip t m { 10.0.0.2 : goto gone }", /No such file/],
      ["add map ip t m { type ipv4_addr : verdict; flags interval; }", /another declaration/],
      ["add chain ip t b { type filter hook input priority 10; policy accept; }", /Operation not supported/],
      ["add chain ip t b { type filter hook forward priority 0; policy accept; }", /Operation not supported/],
      ["add chain ip t b { type nat hook input priority 0; policy accept; }", /File exists/],
      ["add chain ip t a { type filter hook input priority 0; policy accept; }", /Operation not supported/],
    ] as const
  ) {
    assertMatch((await assertRejects(() => f.apply(bad + "\n"), NftError)).message, why, bad);
  }
  // As nft 1.0.6: no rule may read a typeof map the kernel holds; written with the map, it may.
  await f.apply("add map ip t n { typeof numgen random mod 1 : ip daddr . th dport; }\n");
  const readN =
    "add rule ip t a meta l4proto { tcp, udp, sctp } th dport != 0 dnat ip to numgen random mod 2 map @n\n";
  assertMatch((await assertRejects(() => f.apply(readN), NftError)).message, /conflicting protocols/);
  await f.apply(
    "delete map ip t n\nadd map ip t n { typeof numgen random mod 1 : ip daddr . th dport; }\n" + readN,
  );
  // Re-adding what exists is fine (a priority by name is its number); an unreferenced chain may go
  // with its rules.
  await f.apply("add element ip t m { 10.0.0.1 : goto a }\nadd chain ip t a\nadd rule ip t a drop\n");
  await f.apply(
    "add chain ip t b { type filter hook input priority filter; policy accept; }\nadd chain ip t b\n",
  );
  await f.apply("delete element ip t m { 10.0.0.1 }\ndelete chain ip t a\n");
  assertEquals(f.listChains("IPv4", "t"), ["b"]);
});

/** Full and partial transactions of the real proxier, for comparing the fake with the kernel. */
async function transactions(family: "IPv4" | "IPv6"): Promise<string[]> {
  const { fake, proxier, clock } = family === "IPv4"
    ? nftablesSetup({ maglevTableSize: 251 }, { objects: TOPOLOGY })
    : nftablesSetup({
      maglevTableSize: 251,
      family: "IPv6",
      nodeIPs: ["fd00:0:2::2"],
      localDetection: { mode: "ClusterCIDR", clusterCIDRs: ["fd00:180::/64"] },
      affinitySupported: false,
    }, { objects: { id: "none", build: () => ({ services: [], slices: [] }) } });
  if (family === "IPv6") {
    proxier.onServiceAdd(makeService("ns1", "v6", (s) => {
      s.spec!.type = "LoadBalancer";
      s.spec!.clusterIPs = ["fd00:30::41"];
      s.spec!.ports![0].nodePort = 30080;
      s.spec!.loadBalancerSourceRanges = ["fd00:99::/120"];
      s.status = { loadBalancer: { ingress: [{ ip: "fd00:99::33" }] } };
    }));
    proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "v6", (s) => {
      s.addressType = "IPv6";
      s.endpoints = [ep("fd00:180::1"), ep("fd00:180::2")];
    }));
  } else {
    proxier.onServiceAdd(makeService("ns9", "sticky", (s) => {
      s.spec!.clusterIPs = ["172.30.9.9"];
      s.spec!.sessionAffinity = "ClientIP";
    }));
    proxier.onEndpointSliceAdd(makeEndpointSlice("ns9", "sticky", (s) => s.endpoints = [ep("10.180.9.1")]));
  }
  // The schedulers: lb chains of their own, and a Maglev table.
  const v6 = family === "IPv6";
  const schedEps = (n: number) =>
    Array.from({ length: n }, (_, i) => ep(v6 ? `fd00:180::7:${i + 1}` : `10.180.7.${i + 1}`));
  for (const [i, scheduler] of ["sh", "rr", "dh", "mh"].entries()) {
    proxier.onServiceAdd(makeService("sched", scheduler, (s) => {
      s.spec!.clusterIPs = [v6 ? `fd00:30::7${i}` : `172.30.7.${i + 1}`];
      s.metadata!.annotations = { "kube-router.io/service.scheduler": scheduler };
    }));
    proxier.onEndpointSliceAdd(makeEndpointSlice("sched", scheduler, (s) => {
      s.addressType = family;
      s.endpoints = schedEps(3);
    }));
  }
  await proxier.syncNow();
  // A partial sync: a Maglev Service's fourth endpoint (the slots that move), and for IPv4 an
  // endpoint added and a service removed.
  proxier.onEndpointSliceUpdate(
    makeEndpointSlice("sched", "mh"),
    makeEndpointSlice("sched", "mh", (s) => {
      s.addressType = family;
      s.endpoints = schedEps(4);
    }),
  );
  if (family === "IPv4") {
    proxier.onEndpointSliceUpdate(
      makeEndpointSlice("ns9", "sticky"),
      makeEndpointSlice("ns9", "sticky", (s) => s.endpoints = [ep("10.180.9.1"), ep("10.180.9.2")]),
    );
    proxier.onServiceDelete(makeService("topo", "unhinted"));
  } else {
    proxier.onEndpointSliceUpdate(
      makeEndpointSlice("ns1", "v6"),
      makeEndpointSlice("ns1", "v6", (s) => {
        s.addressType = "IPv6";
        s.endpoints = [ep("fd00:180::1"), ep("fd00:180::3"), ep("fd00:180::4")];
      }),
    );
  }
  await proxier.syncNow();
  // A partial sync that needs an endpoint count no chain exists for yet (rewrites a backends map).
  const many = Array.from(
    { length: 40 },
    (_, i) => ep(family === "IPv4" ? `10.180.8.${i + 1}` : `fd00:180::8:${i + 1}`),
  );
  proxier.onServiceAdd(makeService("ns8", "big", (s) => {
    s.spec!.clusterIPs = [family === "IPv4" ? "172.30.8.8" : "fd00:30::88"];
  }));
  proxier.onEndpointSliceAdd(makeEndpointSlice("ns8", "big", (s) => {
    s.addressType = family;
    s.endpoints = many;
  }));
  await proxier.syncNow();
  // A partial sync of a few statements (a Service gone), as most are: one line for nft -i.
  proxier.onServiceDelete(makeService("sched", "rr"));
  await proxier.syncNow();
  // A second full sync on the existing table (the hourly resync).
  await clock.advance(3_600_000);
  await proxier.syncNow();
  // The first sync's new Maglev table came in a transaction of its own, and the deleted Service's
  // unused lb chain went in one of its own.
  assertEquals(fake.transactions.length, 7);
  return fake.transactions;
}

Deno.test({
  name:
    "FakeNft lists what the real nft lists after the same full and partial transactions, both families, each through nft -i",
  ignore: !(await netnsAvailable()) || !(await commandWorks("nft")),
  async fn() {
    for (const family of ["IPv4", "IPv6"] as const) {
      const txs = await transactions(family);
      const fake = new FakeNft();
      await withNamespace(async (plain) => {
        const exec = new NetnsSessionExecutor(plain.ns);
        const real = new NftRunner({ exec, family });
        let byFile = 0;
        const run = exec.run.bind(exec);
        exec.run = (cmd, o) => {
          if (o.args[0] === "-f") byFile++;
          return run(cmd, o);
        };
        for (const [i, tx] of txs.entries()) {
          await fake.apply(tx);
          await real.apply(tx);
          const fam = family === "IPv4" ? "ip" : "ip6";
          const listed = await exec.run("nft", { args: ["list", "table", fam, "kube-proxy"] });
          assertEquals(listed.code, 0, listed.stderr);
          assertEquals(
            normalizeListing(fake.listTable(family, "kube-proxy")).split("\n"),
            normalizeListing(listed.stdout).split("\n"),
            `${family} after transaction ${i + 1}`,
          );
          assertEquals(
            (await real.listChains("kube-proxy"))?.sort((a, b) => a.name.localeCompare(b.name)),
            (await fake.forFamily(family).listChains("kube-proxy"))?.sort((a, b) =>
              a.name.localeCompare(b.name)
            ),
          );
        }
        await real.close();
        // Every transaction went to one nft -i: the largest, a whole table, is 30 KiB.
        assertEquals([exec.sessions.length, byFile], [1, 0], family);
        // What nft lists, it can load again (an operator's `nft list ruleset` backup works).
        const saved = await exec.run("nft", { args: ["list", "ruleset"] });
        await exec.run("nft", { args: ["flush", "ruleset"] });
        const reloaded = await exec.run("nft", { args: ["-f", "-"], stdin: saved.stdout });
        assertEquals(reloaded.code, 0, reloaded.stderr);
        assert(saved.stdout.includes("map backends"), "the listing held our maps");
      });
    }
  },
});

Deno.test({
  name:
    "refusals: the real nft and the fake refuse the same statements of one check, each on its line, and neither keeps anything",
  ignore: !(await netnsAvailable()) || !(await commandWorks("nft")),
  async fn() {
    const setup = `${BASE}add map ip t unused { type ipv4_addr : verdict; }
add set ip t gen { type mark; }
add element ip t m { 10.0.0.2 : goto a }
add element ip t gen { 0x00000007 }
`;
    const check = `delete element ip t gen { 0x00000007 }
delete element ip t m { 10.0.0.1, 10.0.0.3 }
delete element ip t m { 10.0.0.2 }
delete map ip t m
delete map ip t unused
`;
    const fake = new FakeNft();
    await fake.apply(setup);
    const seen = (rs: { lineNumber: number; at: string; message: string }[]) =>
      rs.map((
        r,
      ) => [r.lineNumber, r.at, /No such file or directory|Device or resource busy/.exec(r.message)?.[0]]);
    const expected = [[2, "10.0.0.3", "No such file or directory"], [4, "m", "Device or resource busy"]];
    assertEquals(seen(await fake.forFamily("IPv4").refusals(check)), expected, "the fake");
    assertEquals(fake.listElements("IPv4", "t", "m").length, 2, "the fake kept its elements");
    await withNamespace(async (exec) => {
      const real = new NftRunner({ exec, family: "IPv4" });
      await real.apply(setup);
      assertEquals(seen(await real.refusals(check)), expected, "the real nft");
      assertEquals((await real.listElements("t", "m")).length, 2, "the kernel kept its elements");
      assertEquals(await real.refusals("delete element ip t m { 10.0.0.1 }\n"), [], "nothing refused");
    });
  },
});
