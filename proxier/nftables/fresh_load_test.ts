import type { NFTables } from "../../iptables/nft.ts";
import { NftError, scriptText } from "../../iptables/nft.ts";
import { commandWorks, netnsAvailable, withNftRunner } from "../../tests/support/namespace.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { assert, assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { ElementBook } from "./element_book.ts";
import { evenPartStatements, FRESH_LANES, FreshLoad, FreshStream, LANE_STATEMENTS } from "./fresh_load.ts";
import { CLUSTER_IPS, LB, TABLE } from "./layout.ts";
import type { ServicePortInfo } from "../model/types.ts";

/**
 * The fake's IPv4 whose applies wait for `release(n)` (the n-th apply, from 0) when `held` says so:
 * what the kernel holds, and in which order transactions went in, as nft's would.
 */
function gated(held: (n: number) => boolean = () => false) {
  const fake = new FakeNft();
  const inner = fake.forFamily("IPv4");
  const gates = new Map<number, () => void>();
  const started: string[] = [];
  let running = 0;
  let most = 0;
  let n = 0;
  // Event-driven waits: each apply that starts or is held wakes them to look again, and each that
  // ends a macrotask later, once the load's own bookkeeping of it (its microtasks) is done.
  let waiters: Array<() => void> = [];
  let later: ReturnType<typeof setTimeout> | undefined;
  const wake = () => {
    const now = waiters;
    waiters = [];
    for (const w of now) w();
  };
  const wakeLater = () => {
    later ??= setTimeout(() => {
      later = undefined;
      wake();
    }, 0);
  };
  /** Resolves once `done()` holds, or after `ms` (the caller asserts which). */
  const until = (done: () => boolean, ms = 5_000) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(finish, ms);
      function finish() {
        clearTimeout(timer);
        waiters = waiters.filter((w) => w !== look);
        if (waiters.length === 0 && later !== undefined) {
          clearTimeout(later);
          later = undefined;
        }
        resolve();
      }
      const look = () => done() ? finish() : waiters.push(look);
      look();
      // An apply may have ended just before, its bookkeeping still to come.
      if (waiters.includes(look)) wakeLater();
    });
  const nft: NFTables = {
    ...inner,
    async apply(script, signal) {
      const i = n++;
      const text = scriptText(script);
      started.push(text);
      wake();
      running++;
      most = Math.max(most, running);
      try {
        if (held(i)) {
          await new Promise<void>((resolve) => {
            gates.set(i, resolve);
            wake();
            signal?.addEventListener("abort", () => resolve());
          });
        }
        if (signal?.aborted === true) throw new NftError("nft -f - exited 137: stopped", 137);
        if (text.includes("FAIL")) throw new NftError("nft -f - exited 1: Error: FAIL", 1);
        return await inner.apply(text);
      } finally {
        running--;
        if (waiters.length > 0) wakeLater();
      }
    },
  };
  const release = async (i: number) => {
    await until(() => gates.has(i));
    gates.get(i)!();
  };
  return { fake, nft, started, release, until, most: () => most };
}

const layout = () => {
  const tx = new NftTransaction("IPv4", TABLE).addTable()
    .addSet("set", CLUSTER_IPS, "type ipv4_addr;")
    .addChain("in", { type: "filter", hook: "input", priority: "0" })
    .addRule("in", `ip daddr @${CLUSTER_IPS} accept`);
  return { tx, ...tx.splitForNewTable(1) };
};
const part = (ip: string) => new NftTransaction("IPv4", TABLE).addElements(CLUSTER_IPS, [ip]);

Deno.test("FreshLoad: parts wait for the layout; what the build's end adds waits for the layout too, and the later parts for it; the hooked chains' rules are held", async () => {
  // The layout (apply 0) is slow: nothing may go before it.
  const { fake, nft, started, release } = gated((i) => i === 0);
  const load = new FreshLoad({ nft });
  const l = layout();
  load.start(l.tx.text(), l.hooks);
  load.send(part("172.30.0.1"));
  const end = new NftTransaction("IPv4", TABLE).addSet("map", LB, "type ipv4_addr : verdict;");
  const finishing = load.finish(end, [[part("172.30.0.2")].values()]);
  await new Promise((r) => setTimeout(r, 20));
  assertEquals(started.length, 1, "only the layout runs until it is in");
  await release(0);
  await finishing;
  assertEquals(started.length, 4);
  assert(started[1].includes("172.30.0.1") || started[2].includes("172.30.0.1"), started.join("|"));
  assertEquals(started.filter((s) => s.includes(`add map ip ${TABLE} ${LB}`)).length, 1);
  assert(started[3].includes("172.30.0.2"), "the later part after what the build's end added");
  assertEquals(load.hooks!.text(), `add rule ip ${TABLE} in ip daddr @${CLUSTER_IPS} accept\n`);
  assertEquals(fake.listElements("IPv4", TABLE, CLUSTER_IPS).length, 2);
});

Deno.test("FreshLoad: a part that fails fails the finish with its error once the other lane's nft is stopped; no part starts after it", async () => {
  // The second part is held, so it is running when the first fails.
  const { nft, started } = gated((i) => i === 2);
  const load = new FreshLoad({ nft });
  const l = layout();
  load.start(l.tx.text(), l.hooks);
  load.send(new NftTransaction("IPv4", TABLE).comment("FAIL").addElements(CLUSTER_IPS, ["172.30.0.1"]));
  load.send(part("172.30.0.2"));
  const error = await assertRejects(
    () => load.finish(new NftTransaction("IPv4", TABLE), [[part("172.30.0.3")].values()]),
    NftError,
  );
  assert(error.message.includes("FAIL"), error.message);
  assert(!started.some((s) => s.includes("172.30.0.3")), started.join("|"));
});

Deno.test("FreshLoad: a build that failed stops the load: the running part is stopped, none starts after, and stop resolves once every nft ended", async () => {
  const { nft, started } = gated((i) => i === 1);
  const load = new FreshLoad({ nft });
  const l = layout();
  load.start(l.tx.text(), l.hooks);
  load.send(part("172.30.0.1"));
  await new Promise((r) => setTimeout(r, 10));
  assert(load.busy);
  await load.stop();
  assert(!load.busy, "no nft of the load runs after stop");
  load.send(part("172.30.0.2"));
  await new Promise((r) => setTimeout(r, 10));
  assertEquals(started.length, 2);
});

/** `gated`'s nft offering lanes: which lane applied each part, and which lanes were closed. */
function withLanes(g: ReturnType<typeof gated>) {
  const byLane: string[][] = [];
  const closed: boolean[] = [];
  const nft: NFTables = {
    ...g.nft,
    lane() {
      const i = byLane.push([]) - 1;
      closed.push(false);
      return {
        apply: (script, signal) => (byLane[i].push(scriptText(script)), g.nft.apply(script, signal)),
        close: () => (closed[i] = true, Promise.resolve()),
      };
    },
  };
  return { nft, byLane, closed };
}

Deno.test("FreshLoad: with lanes on offer, every part goes through one of at most FRESH_LANES lanes, each closed once the load ends", async () => {
  const g = gated();
  const { nft, byLane, closed } = withLanes(g);
  const load = new FreshLoad({ nft });
  const l = layout();
  load.start(l.tx.text(), l.hooks);
  for (let i = 1; i <= 6; i++) load.send(part(`172.30.0.${i}`));
  await load.finish(new NftTransaction("IPv4", TABLE), [[part("172.30.0.7")].values()]);
  assert(byLane.length >= 1 && byLane.length <= FRESH_LANES, `${byLane.length} lanes`);
  assertEquals(byLane.flat().length, 7, "each part through a lane");
  assertEquals(g.started.length, 8, "the layout, and the parts");
  assertEquals(closed, byLane.map(() => true));
  assertEquals(g.fake.listElements("IPv4", TABLE, CLUSTER_IPS).length, 7);
});

Deno.test("FreshLoad: the lanes' nft start with the layout's transaction, not once it is in", async () => {
  const g = gated((i) => i === 0);
  const { nft, byLane, closed } = withLanes(g);
  const load = new FreshLoad({ nft });
  const l = layout();
  load.start(l.tx.text(), l.hooks);
  await new Promise((r) => setTimeout(r, 10));
  assertEquals([g.started.length, byLane.length], [1, FRESH_LANES], "the layout held, the lanes there");
  await g.release(0);
  await load.finish(new NftTransaction("IPv4", TABLE), [[part("172.30.0.1")].values()]);
  assertEquals(closed, byLane.map(() => true));
  // A layout refused: every lane is closed.
  const refused = withLanes(gated());
  const failed = new FreshLoad({ nft: refused.nft });
  failed.start("FAIL", l.hooks);
  await assertRejects(() => failed.finish(new NftTransaction("IPv4", TABLE), []), NftError);
  assertEquals(refused.closed, refused.byLane.map(() => true));
  assertEquals(refused.byLane.length, FRESH_LANES);
});

/** Loads one part of `2 * LANE_STATEMENTS + 3` statements (an element each) through `nft`; returns how many it held. */
async function loadOneLongPart(nft: NFTables): Promise<number> {
  const load = new FreshLoad({ nft });
  const l = layout();
  load.start(l.tx.text(), l.hooks);
  const ips = Array.from({ length: 2 * LANE_STATEMENTS + 3 }, (_, i) => `172.30.1.${i}`);
  await load.finish(new NftTransaction("IPv4", TABLE), [[
    new NftTransaction("IPv4", TABLE).addElements(CLUSTER_IPS, ips, 1),
  ].values()]);
  return ips.length;
}

Deno.test("FreshLoad: a lane applies a part of more than LANE_STATEMENTS statements as transactions of LANE_STATEMENTS", async () => {
  const g = gated();
  const { nft, byLane } = withLanes(g);
  const elements = await loadOneLongPart(nft);
  const statements = (t: string) => t.split("\n").filter((x) => x !== "").length;
  assertEquals(byLane.flat().map(statements).sort((a, b) => b - a), [LANE_STATEMENTS, LANE_STATEMENTS, 3]);
  assertEquals(g.fake.listElements("IPv4", TABLE, CLUSTER_IPS).length, elements);
});

Deno.test("FreshLoad: the lanes share a part a transaction at a time: while one lane's is in the kernel, the other loads the rest", async () => {
  // The layout is apply 0; the part's first transaction, apply 1, is held.
  const g = gated((i) => i === 1);
  const { nft, byLane } = withLanes(g);
  const loaded = loadOneLongPart(nft);
  await g.until(() => g.started.length >= 4);
  assertEquals(g.started.length, 4, "the layout, the held transaction, and the part's other two beside it");
  assertEquals(byLane.map((l) => l.length), [1, 2], "the held transaction's lane, and the other");
  await g.release(1);
  const elements = await loaded;
  assertEquals(byLane.flat().length, 3);
  assertEquals(g.fake.listElements("IPv4", TABLE, CLUSTER_IPS).length, elements);
});

Deno.test("FreshLoad: when its nft offers no lane (none can be kept running), each part goes whole as one transaction", async () => {
  const g = gated();
  const elements = await loadOneLongPart({ ...g.nft, lane: () => undefined });
  assertEquals(g.started.length, 2, "the layout, and the part in one transaction");
  assertEquals(g.fake.listElements("IPv4", TABLE, CLUSTER_IPS).length, elements);
});

Deno.test("FreshLoad: a part refused in a lane fails the load, and every lane is closed", async () => {
  const g = gated((i) => i === 2);
  const { nft, byLane, closed } = withLanes(g);
  const load = new FreshLoad({ nft });
  const l = layout();
  load.start(l.tx.text(), l.hooks);
  load.send(new NftTransaction("IPv4", TABLE).comment("FAIL").addElements(CLUSTER_IPS, ["172.30.0.1"]));
  load.send(part("172.30.0.2"));
  await assertRejects(() => load.finish(new NftTransaction("IPv4", TABLE), []), NftError);
  assertEquals(closed, byLane.map(() => true));
  assertEquals(closed.length, FRESH_LANES);
});

Deno.test({
  name:
    "FreshLoad through a real nft's lanes: a new table's parts go to an nft -i per lane (no nft -f), all of them in the kernel; a refused part fails the load naming its statement",
  ignore: !(await netnsAvailable()) || !(await commandWorks("nft")),
  async fn() {
    await withNftRunner(async (exec, nft) => {
      const byFile = exec.fileRuns;
      const ip = (i: number) => `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`;
      // Parts of more statements than a lane's transaction: each goes as two.
      const statements = LANE_STATEMENTS + 4;
      const bigPart = (from: number) =>
        new NftTransaction("IPv4", TABLE).addElements(
          CLUSTER_IPS,
          Array.from({ length: statements * 1000 }, (_, i) => ip(from + i)),
        );
      const load = new FreshLoad({ nft });
      const l = layout();
      load.start(l.tx.text(), l.hooks);
      for (let p = 0; p < 3; p++) load.send(bigPart(p * statements * 1000));
      await load.finish(new NftTransaction("IPv4", TABLE), []);
      await nft.apply(load.hooks!.statements());
      const listed = await exec.run("nft", { args: ["-j", "list", "set", "ip", TABLE, CLUSTER_IPS] });
      const set = (JSON.parse(listed.stdout).nftables as Array<{ set?: { elem?: unknown[] } }>)
        .find((o) => o.set !== undefined)!.set!;
      assertEquals(set.elem?.length, 3 * statements * 1000);
      assertEquals(byFile, [], "no process per part");
      // The runner's own session and one per lane, each ended.
      assertEquals(exec.sessions.length, 1 + FRESH_LANES);
      assert(exec.sessions.slice(1).every((s) => s.closed));

      await exec.run("nft", { args: ["flush", "ruleset"] });
      const failing = new FreshLoad({ nft });
      const f = layout();
      failing.start(f.tx.text(), f.hooks);
      failing.send(bigPart(0).addElements(CLUSTER_IPS, ["10.0.0.300"]));
      const e = await assertRejects(() => failing.finish(new NftTransaction("IPv4", TABLE), []), NftError);
      assertEquals(e.line, `add element ip ${TABLE} ${CLUSTER_IPS} { 10.0.0.300 }`);
      assertEquals(byFile, []);
      assert(exec.sessions.slice(1).every((s) => s.closed), "every lane's nft ended");
    });
  },
});

Deno.test("FreshStream: a part goes once a whole part of finished elements is ready, starting the load with the layout; the rest is what it was not handed", async () => {
  const { fake, nft, started } = gated();
  const book = new ElementBook();
  const tx = layout().tx;
  tx.addChain("in2", { type: "filter", hook: "output", priority: "0" }).addRule("in2", "accept");
  const stream = new FreshStream({ tx, book, nft, chunkStatements: 2 });
  const fill = (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      book.fill(`ns/s${i}:http`, [{ container: CLUSTER_IPS, key: `172.30.${i >> 8}.${i & 255}` }]);
    }
  };
  fill(0, 900);
  await stream.step();
  assertEquals(
    [stream.load, started.length],
    [undefined, 0],
    "900 elements are one statement, less than a part",
  );
  fill(900, 2500);
  await stream.step();
  assert(stream.load !== undefined);
  assertEquals(tx.text(), "", "the layout went to the load");
  const rest = stream.rest([{
    container: CLUSTER_IPS,
    count: book.size(CLUSTER_IPS),
    texts: book.texts(CLUSTER_IPS),
  }]);
  assertEquals(rest[0].count, 500);
  const end = new NftTransaction("IPv4", TABLE);
  await stream.load.finish(end, [end.elementParts(rest, 2)]);
  assertEquals(fake.listElements("IPv4", TABLE, CLUSTER_IPS).length, 2500);
  assertEquals(stream.load.hooks!.text(), `add rule ip ${TABLE} in2 accept\n`);
  assert(!started[0].includes("add rule ip kube-proxy in2"), "the hooked chains' rules are held back");
});

Deno.test("FreshStream: a table sure to fill more than a part loads its layout at the first step, then parts of a sixteenth of a part, doubling up to a whole one", async () => {
  const { fake, nft, started, until } = gated();
  const book = new ElementBook();
  const tx = layout().tx;
  const chunk = 16;
  // Two elements a port at least: 8,000 ports make 16 statements, a whole part, for sure.
  const services = new Map(Array.from({ length: 8000 }, (_, i) => [`ns/s${i}:http`, {} as ServicePortInfo]));
  const stream = new FreshStream({ tx, book, nft, chunkStatements: chunk, services });
  await stream.step();
  assert(stream.load !== undefined, "the load started before any element was ready");
  assertEquals(started.length, 1, "the layout alone");
  let filled = 0;
  const fill = (n: number) => {
    for (const end = filled + n; filled < end; filled++) {
      book.fill(`ns/s${filled}:http`, [{
        container: CLUSTER_IPS,
        key: `10.${filled >> 16}.${(filled >> 8) & 255}.${filled & 255}`,
      }]);
    }
  };
  const statements = (text: string) => text.split("\n").filter((l) => l.startsWith("add element")).length;
  for (let round = 0; round < 6; round++) {
    fill(16_000);
    // A lane is free once the part before is in.
    await until(() => stream.load!.wanting);
    assert(stream.load.wanting, "a lane free within 5 s");
    await stream.step();
  }
  assertEquals(started.slice(1).map(statements), [1, 2, 4, 8, 16, 16]);
  const rest = stream.rest([{
    container: CLUSTER_IPS,
    count: book.size(CLUSTER_IPS),
    texts: book.texts(CLUSTER_IPS),
  }]);
  const end = new NftTransaction("IPv4", TABLE);
  await stream.load.finish(end, [end.elementParts(rest, chunk)]);
  assertEquals(fake.listElements("IPv4", TABLE, CLUSTER_IPS).length, 96_000);
});

Deno.test("FreshStream: no pause for a collection while the layout or a part under a quarter of a whole one is in flight; before the load and between larger parts, one", async () => {
  const { nft, started, until } = gated();
  const book = new ElementBook();
  const chunk = 16;
  const services = new Map(Array.from({ length: 8000 }, (_, i) => [`ns/s${i}:http`, {} as ServicePortInfo]));
  const pauses: number[] = [];
  const stream = new FreshStream({
    tx: layout().tx,
    book,
    nft,
    chunkStatements: chunk,
    services,
    betweenParts: () => pauses.push(started.length - 1),
  });
  assert(stream.pausable, "no load yet");
  await stream.step();
  assert(!stream.pausable, "the layout in flight");
  const pausable: boolean[] = [];
  for (let round = 0; round < 6; round++) {
    for (let i = round * 16_000; i < (round + 1) * 16_000; i++) {
      book.fill(`ns/s${i}:http`, [{
        container: CLUSTER_IPS,
        key: `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`,
      }]);
    }
    // Each part in before the next is cut: which of them a pause followed is then certain.
    await until(() => !stream.load!.busy);
    assert(!stream.load!.busy, "the part in within 5 s");
    await stream.step();
    pausable.push(stream.pausable);
  }
  await until(() => !stream.load!.busy);
  // Parts of 1, 2, 4, 8, 16 and 16 statements: from the second on, the next is a quarter part or more.
  assertEquals(pausable, [false, true, true, true, true, true]);
  assertEquals(pauses, [2, 3, 4, 5, 6], "a pause after each part once the next is a quarter part or more");
});

Deno.test("FreshStream: a table that may fit a part starts no load until a whole part is ready", async () => {
  const { nft, started } = gated();
  const book = new ElementBook();
  const services = new Map(Array.from({ length: 7999 }, (_, i) => [`ns/s${i}:http`, {} as ServicePortInfo]));
  const stream = new FreshStream({ tx: layout().tx, book, nft, chunkStatements: 16, services });
  await stream.step();
  assertEquals([stream.load, started.length], [undefined, 0]);
});

Deno.test("evenPartStatements: at most a chunk a part, no more parts than whole rounds of the lanes need, and what fits one round split a statement apart at most", () => {
  assertEquals(FRESH_LANES, 2);
  for (const chunk of [1, 8, 64]) {
    for (let statements = 1; statements <= 5 * chunk; statements++) {
      const size = evenPartStatements(statements, chunk);
      const at = `${statements} statements, chunk ${chunk}: parts of ${size}`;
      assert(size >= 1 && size <= chunk, at);
      // Parts of `size`, the last holding the remnant, as elementParts writes them.
      const parts = Math.ceil(statements / size);
      assert(parts <= Math.ceil(statements / (chunk * FRESH_LANES)) * FRESH_LANES, at);
      if (statements <= chunk * FRESH_LANES && parts === FRESH_LANES) {
        assert(size - (statements - size) <= 1, at);
      }
    }
  }
  // 72 statements in parts of 64 would leave one lane 64 while the other ends 8.
  assertEquals(evenPartStatements(72, 64), 36);
  assertEquals(evenPartStatements(136, 64), 34);
  assertEquals(evenPartStatements(40, 64), 20);
  assertEquals(evenPartStatements(0, 64), 1);
});
