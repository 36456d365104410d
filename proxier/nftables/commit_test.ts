import type { NFTables } from "../../iptables/nft.ts";
import { NftError, scriptText } from "../../iptables/nft.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { assert, assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { commitSync } from "./commit.ts";
import { FRESH_LANES } from "./fresh_load.ts";
import { SYNC_GENERATION, TABLE } from "./layout.ts";

/** A table of `n` map elements, added 10 to a statement, and a hooked chain that reads them. */
function build(n: number): NftTransaction {
  const tx = new NftTransaction("IPv4", TABLE).addTable()
    .addSet("set", SYNC_GENERATION, "type mark;")
    .addSet("map", "m", "type ipv4_addr : mark;")
    .addChain("in", { type: "filter", hook: "input", priority: "0" })
    .addRule("in", "meta mark set ip daddr map @m");
  const elements = Array.from({ length: n }, (_, i) => `10.0.${i >> 8}.${i & 255} : 0x${i.toString(16)}`);
  return tx.addElements("m", elements, 10);
}

/** The fake's view of IPv4, its applies watched: how many ran at once, and each one's signal. */
function watched(fake: FakeNft, o: { fail?: (script: string) => boolean } = {}) {
  const inner = fake.forFamily("IPv4");
  const seen = { running: 0, most: 0, signals: [] as (AbortSignal | undefined)[] };
  const nft: NFTables = {
    ...inner,
    async apply(script, signal) {
      seen.running++;
      seen.most = Math.max(seen.most, seen.running);
      seen.signals.push(signal);
      try {
        // A refused transaction fails as soon as nft has read it.
        if (o.fail?.(scriptText(script)) === true) {
          throw new NftError("nft -f - exited 1: Error: No such file", 1);
        }
        // Long enough for every lane to start; a stopped one ends at once, as nft killed does.
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 20);
          signal?.addEventListener("abort", () => (clearTimeout(t), resolve()));
        });
        if (signal?.aborted === true) throw new NftError("nft -f - exited 137: stopped", 137);
        return await inner.apply(script);
      } finally {
        seen.running--;
      }
    },
  };
  return { nft, seen };
}

const GENERATION = "0x00000001";

Deno.test("commitSync: a new table whose elements fill several parts goes structure first, then the parts two at a time, the hooked chains' rules and the generation last; the kernel holds what one transaction would have put there", async () => {
  const fake = new FakeNft();
  const { nft, seen } = watched(fake);
  await commitSync({ nft, tx: build(95), generation: GENERATION, fresh: true, chunkStatements: 2 });
  const txs = fake.transactions;
  // 10 statements of elements in parts of 2, between the structure and the generation.
  assertEquals(txs.length, 1 + 5 + 1);
  assert(!txs[0].includes("add element") && !txs[0].includes("add rule"), txs[0]);
  for (const part of txs.slice(1, -1)) {
    const statements = part.split("\n").filter((l) => l !== "");
    assertEquals(statements.length, 2, part);
    assert(statements.every((l) => l.startsWith("add element ip kube-proxy m ")), part);
  }
  // Until the hook's rule is in, no packet meets the half-loaded map.
  assertEquals(txs.at(-1)!.trim().split("\n"), [
    "add rule ip kube-proxy in meta mark set ip daddr map @m",
    "flush set ip kube-proxy sync-generation",
    `add element ip kube-proxy sync-generation { ${GENERATION} }`,
  ]);
  assertEquals(seen.most, FRESH_LANES);

  const whole = new FakeNft();
  await commitSync({ nft: whole.forFamily("IPv4"), tx: build(95), generation: GENERATION, fresh: false });
  assertEquals(whole.transactions.length, 1);
  assertEquals(fake.listTable("IPv4", TABLE), whole.listTable("IPv4", TABLE));
  assertEquals(fake.listElements("IPv4", TABLE, "m").length, 95);
});

Deno.test("commitSync: a table that exists, or a new one whose elements fit one part, is one transaction", async () => {
  for (const [fresh, n] of [[false, 95], [true, 20]] as const) {
    const fake = new FakeNft();
    await commitSync({
      nft: fake.forFamily("IPv4"),
      tx: build(n),
      generation: GENERATION,
      fresh,
      chunkStatements: 2,
    });
    assertEquals(fake.transactions.length, 1, `fresh=${fresh}, ${n} elements`);
    assertEquals(fake.listElements("IPv4", TABLE, "m").length, n);
    assertEquals(fake.listElements("IPv4", TABLE, SYNC_GENERATION).length, 1);
  }
});

Deno.test("commitSync: a part that fails fails the commit with its error; no part starts after it, the one running is stopped, and the generation is never written", async () => {
  const fake = new FakeNft();
  // The second part fails (its first element is the 21st).
  const { nft, seen } = watched(fake, { fail: (s) => s.includes("10.0.0.20 : 0x14") });
  const error = await assertRejects(
    () => commitSync({ nft, tx: build(95), generation: GENERATION, fresh: true, chunkStatements: 2 }),
    NftError,
  );
  assert(error.message.includes("No such file"), error.message);
  // The structure, then the first two parts side by side; the first was stopped by the second's failure.
  assertEquals(seen.signals.length, 3);
  assert(seen.signals[1]?.aborted === true, "the part running beside the failed one was stopped");
  assertEquals(seen.running, 0, "the commit returns only after every part it started ended");
  assertEquals(fake.listElements("IPv4", TABLE, SYNC_GENERATION), []);
});

Deno.test("commitSync: a sync stopped on shutdown stops the parts", async () => {
  const fake = new FakeNft();
  const { nft, seen } = watched(fake);
  const ac = new AbortController();
  const done = commitSync({
    nft,
    tx: build(95),
    generation: GENERATION,
    fresh: true,
    chunkStatements: 2,
    signal: ac.signal,
  });
  setTimeout(() => ac.abort(), 30);
  await assertRejects(() => done, NftError);
  assertEquals(seen.signals.length, 3, "the structure and two parts; none after the stop");
  assertEquals(fake.listElements("IPv4", TABLE, SYNC_GENERATION), []);
});

Deno.test("commitSync: elements given as sources go in the parts of a new table, each part written only when a lane takes it; in one transaction otherwise", async () => {
  const n = 2500;
  const texts = (read: { count: number }) =>
    function* () {
      for (let i = 0; i < n; i++) {
        read.count++;
        yield `10.1.${i >> 8}.${i & 255} : 0x${i.toString(16)}`;
      }
    };
  // Fresh: the 3 statements of 1,000 elements of the source, one to a part, after the structure.
  const fake = new FakeNft();
  const { nft } = watched(fake);
  const read = { count: 0 };
  const readAtEachApply: number[] = [];
  const counting: NFTables = {
    ...nft,
    apply(script, signal) {
      readAtEachApply.push(read.count);
      return nft.apply(script, signal);
    },
  };
  await commitSync({
    nft: counting,
    tx: build(0),
    generation: GENERATION,
    fresh: true,
    chunkStatements: 1,
    elements: [{ container: "m", count: n, texts: texts(read)() }],
  });
  assertEquals(fake.transactions.length, 1 + 3 + 1);
  // The structure went before any element was read; the first two parts (one per lane) before the third.
  assertEquals(readAtEachApply, [0, 1000, 2000, n, n]);
  assertEquals(fake.listElements("IPv4", TABLE, "m").length, n);
  // A table that exists: the same elements inside the one transaction, before the generation.
  const whole = new FakeNft();
  await commitSync({
    nft: whole.forFamily("IPv4"),
    tx: build(0),
    generation: GENERATION,
    fresh: false,
    elements: [{ container: "m", count: n, texts: texts({ count: 0 })() }],
  });
  assertEquals(whole.transactions.length, 1);
  assertEquals(fake.listTable("IPv4", TABLE), whole.listTable("IPv4", TABLE));
});

Deno.test("commitSync: betweenParts runs after each element part of a new table is in, before its lane takes another; never for one transaction", async () => {
  const fake = new FakeNft();
  const { nft } = watched(fake);
  const log: string[] = [];
  const logged: NFTables = {
    ...nft,
    async apply(script, signal) {
      await nft.apply(script, signal);
      log.push(scriptText(script).includes("add element ip kube-proxy m") ? "part" : "other");
    },
  };
  const betweenParts = () => log.push("between");
  await commitSync({
    nft: logged,
    tx: build(95),
    generation: GENERATION,
    fresh: true,
    chunkStatements: 2,
    betweenParts,
  });
  // The structure, 5 parts each followed by its call, then the hooked chains' rules.
  assertEquals(log.filter((x) => x === "part").length, 5);
  assertEquals(log.filter((x) => x === "between").length, 5);
  assertEquals(log[0], "other");
  assertEquals(log.at(-1), "other");
  log.forEach((x, i) => x === "between" && assertEquals(log[i - 1], "part", log.join(" ")));
  log.length = 0;
  await commitSync({ nft: logged, tx: build(95), generation: GENERATION, fresh: false, betweenParts });
  assertEquals(log.length, 1, "one transaction");
  assertEquals(log.includes("between"), false);
});

Deno.test("commitSync: the elements left for a new table go in parts as even as the lanes allow, so the lanes end together", async () => {
  const fake = new FakeNft();
  const { nft } = watched(fake);
  // 9 statements of 10 elements, in parts of at most 8: split at 8, one lane would load 8 while the other ends 1.
  await commitSync({ nft, tx: build(90), generation: GENERATION, fresh: true, chunkStatements: 8 });
  const parts = fake.transactions.slice(1, -1).map((t) =>
    t.split("\n").filter((l) => l.startsWith("add element")).length
  );
  assertEquals(parts, [5, 4]);
  assertEquals(fake.listElements("IPv4", TABLE, "m").length, 90);
});
