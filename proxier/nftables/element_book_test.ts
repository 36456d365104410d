import { Session } from "node:inspector";
import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ElementBook, type Touched } from "./element_book.ts";
import { BACKENDS, CLUSTER_IPS, LB, SERVICE_IPS } from "./layout.ts";
import type { Element } from "./port_elements.ts";
import { BACKENDS_GROUP, backendsGroup } from "./backends.ts";

const diffOf = (book: ElementBook, f: (t: Touched) => void) => {
  const t: Touched = new Map();
  f(t);
  return Object.fromEntries([...book.diff(t)].map(([c, d]) => [c, d]));
};

Deno.test("element book: a set member two ports claim stays until both are gone", () => {
  const book = new ElementBook();
  const ip: Element = { container: CLUSTER_IPS, key: "172.30.0.1" };
  book.fill("ns/a:http", [ip]);
  book.fill("ns/a:https", [ip, ip]);
  assertEquals([...book.texts(CLUSTER_IPS)], ["172.30.0.1"]);
  assertEquals(diffOf(book, (t) => book.replace("ns/a:http", [], t)), {});
  assertEquals(diffOf(book, (t) => book.replace("ns/a:https", [], t)), {
    [CLUSTER_IPS]: { del: ["172.30.0.1"], add: [] },
  });
  assertEquals([book.size(CLUSTER_IPS), book.ports], [0, 0]);
});

Deno.test("element book: a map key claimed twice keeps the first value, says so, and hands over when it goes", () => {
  const book = new ElementBook();
  const key = "192.168.99.1 . tcp . 80";
  const a: Element = { container: SERVICE_IPS, key, value: "goto external-a" };
  const b: Element = { container: SERVICE_IPS, key, value: "goto external-b" };
  assertEquals(book.fill("ns/a:http", [a]), []);
  const t: Touched = new Map();
  assertEquals(book.replace("ns/b:http", [b], t), [
    `${SERVICE_IPS} ${key}: claimed by ns/a:http; ns/b:http waits`,
  ]);
  assertEquals(Object.fromEntries(book.diff(t)), {});
  assertEquals(book.effective(SERVICE_IPS, key), `${key} : goto external-a`);
  assertEquals(diffOf(book, (t) => book.replace("ns/a:http", [], t)), {
    [SERVICE_IPS]: { del: [key], add: [`${key} : goto external-b`] },
  });
});

Deno.test("element book: a partial sync writes exactly the keys whose effective element changed", () => {
  const book = new ElementBook();
  const els = (ips: string[]): Element[] => [
    { container: LB, key: "172.30.0.1 . tcp . 80", value: `goto lb-${ips.length}` },
    ...ips.map((ip, i) => ({
      container: BACKENDS,
      key: `172.30.0.1 . tcp . 80 . ${i}`,
      value: `${ip} . 8080`,
    })),
  ];
  book.fill("ns/a:http", els(["10.0.0.1", "10.0.0.2"]));
  assertEquals(diffOf(book, (t) => book.replace("ns/a:http", els(["10.0.0.1", "10.0.0.2"]), t)), {});
  assertEquals(diffOf(book, (t) => book.replace("ns/a:http", els(["10.0.0.1", "10.0.0.3", "10.0.0.4"]), t)), {
    [LB]: { del: ["172.30.0.1 . tcp . 80"], add: ["172.30.0.1 . tcp . 80 : goto lb-3"] },
    [BACKENDS]: {
      del: ["172.30.0.1 . tcp . 80 . 1"],
      add: ["172.30.0.1 . tcp . 80 . 1 : 10.0.0.3 . 8080", "172.30.0.1 . tcp . 80 . 2 : 10.0.0.4 . 8080"],
    },
  });
  assertEquals(book.size(BACKENDS), 3);
});

Deno.test("element book: a backends group is one claim, written and diffed endpoint by endpoint", () => {
  const book = new ElementBook(new Map([[BACKENDS, BACKENDS_GROUP]]));
  const entry = "172.30.0.1 . tcp . 80";
  const group = (...ips: string[]) => backendsGroup(BACKENDS, entry, ips.map((ip) => `${ip} . 8080`));
  const at = (i: number, ip: string) => `${entry} . ${i} : ${ip} . 8080`;
  book.fill("ns/a:http", [group("10.0.0.1", "10.0.0.2", "10.0.0.3")]);
  assertEquals([...book.texts(BACKENDS)], [at(0, "10.0.0.1"), at(1, "10.0.0.2"), at(2, "10.0.0.3")]);
  assertEquals(book.size(BACKENDS), 3);
  // One endpoint replaced: that index only.
  assertEquals(
    diffOf(book, (t) => book.replace("ns/a:http", [group("10.0.0.1", "10.0.0.9", "10.0.0.3")], t)),
    {
      [BACKENDS]: { del: [`${entry} . 1`], add: [at(1, "10.0.0.9")] },
    },
  );
  // Shrinking deletes the indices past the end; growing adds them.
  assertEquals(diffOf(book, (t) => book.replace("ns/a:http", [group("10.0.0.1")], t)), {
    [BACKENDS]: { del: [`${entry} . 1`, `${entry} . 2`], add: [] },
  });
  assertEquals(book.size(BACKENDS), 1);
  assertEquals(diffOf(book, (t) => book.replace("ns/a:http", [group("10.0.0.1", "10.0.0.4")], t)), {
    [BACKENDS]: { del: [], add: [at(1, "10.0.0.4")] },
  });
  // A second port on the same entry waits whole; when the first goes, the kernel gets the difference.
  const t: Touched = new Map();
  assertEquals(book.replace("ns/b:http", [group("10.0.0.1", "10.0.0.5", "10.0.0.6")], t).length, 1);
  assertEquals(Object.fromEntries(book.diff(t)), {});
  assertEquals(book.size(BACKENDS), 2);
  assertEquals(diffOf(book, (t) => book.replace("ns/a:http", [], t)), {
    [BACKENDS]: { del: [`${entry} . 1`], add: [at(1, "10.0.0.5"), at(2, "10.0.0.6")] },
  });
  assertEquals(book.size(BACKENDS), 3);
  assertEquals(diffOf(book, (t) => book.replace("ns/b:http", [], t)), {
    [BACKENDS]: { del: [`${entry} . 0`, `${entry} . 1`, `${entry} . 2`], add: [] },
  });
  assertEquals([book.size(BACKENDS), [...book.texts(BACKENDS)]], [0, []]);
});

/** The V8 heap in use after a full collection, bytes (through the inspector: no flag needed). */
async function heapAfterGc(): Promise<number> {
  const s = new Session();
  s.connect();
  // The inspector's answers do not keep the event loop alive: a timer does, until they come.
  const alive = setInterval(() => {}, 1000);
  const post = (m: string) => new Promise<void>((resolve) => s.post(m, {}, () => resolve()));
  await post("HeapProfiler.collectGarbage");
  await post("HeapProfiler.collectGarbage");
  clearInterval(alive);
  s.disconnect();
  return Deno.memoryUsage().heapUsed;
}

Deno.test("element book: rounds of partial syncs leave it no bigger than the full sync that built it", async () => {
  // 2,000 ports x (1 lb + 10 backends): what a partial sync replaces must cost what the fill cost.
  const ports = 2000;
  const els = (p: number, g: number): Element[] => {
    const entry = `172.30.${p >> 8}.${p & 255} . tcp . 80`;
    return [
      { container: LB, key: entry, value: "goto lb-10" },
      ...Array.from({ length: 10 }, (_, i) => ({
        container: BACKENDS,
        key: `${entry} . ${i}`,
        value: `10.${g}.${p >> 8}.${(p & 255) ^ i} . 8080`,
      })),
    ];
  };
  const base = await heapAfterGc();
  const book = new ElementBook();
  for (let p = 0; p < ports; p++) book.fill(`ns/svc-${p}:http`, els(p, 0));
  const filled = await heapAfterGc() - base;
  // Each round in a function of its own: nothing of a round stays reachable from this one's frame.
  const round = (g: number) => {
    const t: Touched = new Map();
    for (let p = 0; p < ports; p++) book.replace(`ns/svc-${p}:http`, els(p, g), t);
    return book.diff(t).size;
  };
  for (let g = 1; g <= 2; g++) assertEquals(round(g), 1);
  const replaced = await heapAfterGc() - base;
  assertEquals(book.size(BACKENDS), ports * 10);
  assert(
    replaced < filled * 1.1,
    `book after the fill ${filled >> 10} KiB, after two rounds ${replaced >> 10} KiB`,
  );
});

Deno.test("element book: windows over a container go round it, each key once a round, bounded, and start over after a full sync", () => {
  const book = new ElementBook();
  const el = (i: number): Element => ({
    container: SERVICE_IPS,
    key: `172.30.0.${i} . tcp . 80`,
    value: "goto s",
  });
  for (let i = 0; i < 10; i++) book.fill(`ns/s${i}:http`, [el(i)]);
  const round = [
    ...book.window(SERVICE_IPS, 4),
    ...book.window(SERVICE_IPS, 4),
    ...book.window(SERVICE_IPS, 2),
  ];
  assertEquals(new Set(round).size, 10, round.join(", "));
  // The next window starts the next round; one larger than the container names each key once.
  assertEquals(book.window(SERVICE_IPS, 3), round.slice(0, 3));
  assertEquals(book.window(SERVICE_IPS, 50).length, 10);
  // A key added mid-round comes round; one deleted does not.
  const t: Touched = new Map();
  book.replace("ns/s9:http", [], t);
  book.fill("ns/s10:http", [el(10)]);
  const next = [...book.window(SERVICE_IPS, 5), ...book.window(SERVICE_IPS, 5)];
  assert(next.includes(el(10).key) && !next.includes(el(9).key), next.join(", "));
  // A full sync refills the book: no key of before it is named again.
  book.clear();
  book.fill("ns/s0:http", [el(0)]);
  assertEquals(book.window(SERVICE_IPS, 4), [el(0).key]);
  assertEquals(book.window(CLUSTER_IPS, 4), []);
});

Deno.test("element book reader: a fill's elements in first-claim order, each once, going on as the fill goes on; a key claimed again is not read again", () => {
  const book = new ElementBook();
  const reader = book.reader(SERVICE_IPS);
  assertEquals([reader.pending(), [...reader.texts()]], [0, []]);
  const entry = (ip: string, chain: string): Element => ({
    container: SERVICE_IPS,
    key: `${ip} . tcp . 80`,
    value: `goto ${chain}`,
  });
  book.fill("ns/a:http", [entry("172.30.0.1", "internal"), entry("172.30.0.2", "internal")]);
  assertEquals(reader.pending(), 2);
  // Read one, then stop: the other stays pending.
  const first = reader.texts().next().value;
  assertEquals([first, reader.pending()], ["172.30.0.1 . tcp . 80 : goto internal", 1]);
  // Another port's claim on a held key waits behind the first: its value is never read.
  book.fill("ns/b:http", [entry("172.30.0.2", "external"), entry("172.30.0.3", "internal")]);
  assertEquals(reader.pending(), 2);
  assertEquals([...reader.texts()], [
    "172.30.0.2 . tcp . 80 : goto internal",
    "172.30.0.3 . tcp . 80 : goto internal",
  ]);
  assertEquals([reader.pending(), [...reader.texts()]], [0, []]);
  book.fill("ns/c:http", [entry("172.30.0.4", "internal")]);
  assertEquals([...reader.texts()], ["172.30.0.4 . tcp . 80 : goto internal"]);
});

Deno.test("element book reader: a grouped container's elements one by one, a read that stops within a group going on from there", () => {
  const book = new ElementBook(new Map([[BACKENDS, BACKENDS_GROUP]]));
  const reader = book.reader(BACKENDS);
  const entry = (i: number) => `172.30.0.${i} . tcp . 80`;
  const endpoints = (i: number, n: number) => Array.from({ length: n }, (_, k) => `10.0.${i}.${k} . 8080`);
  book.fill("ns/a:http", [backendsGroup(BACKENDS, entry(1), endpoints(1, 3))]);
  book.fill("ns/b:http", [backendsGroup(BACKENDS, entry(2), endpoints(2, 2))]);
  assertEquals(reader.pending(), 5);
  assertEquals([...reader.texts(2)], [
    `${entry(1)} . 0 : 10.0.1.0 . 8080`,
    `${entry(1)} . 1 : 10.0.1.1 . 8080`,
  ]);
  assertEquals(reader.pending(), 3);
  assertEquals([...reader.texts()], [
    `${entry(1)} . 2 : 10.0.1.2 . 8080`,
    `${entry(2)} . 0 : 10.0.2.0 . 8080`,
    `${entry(2)} . 1 : 10.0.2.1 . 8080`,
  ]);
  assertEquals(reader.pending(), 0);
});
