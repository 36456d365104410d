import { assert, assertEquals } from "../../tests/support/assert.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { maglevTable } from "../../loadbalancer/maglev.ts";
import { TABLE } from "./layout.ts";
import { MaglevMaps, maglevName, type MaglevWant } from "./maglev_maps.ts";

const M = 1021;
const SEED = 0x1234;
const name = maglevName("internal", { namespace: "ns", name: "web", port: "http", protocol: "TCP" });
const want = (n: number, skip?: number, sourcePort = true): MaglevWant => ({
  name,
  sourcePort,
  endpoints: Array.from({ length: n }, (_, i) => i + 1).filter((i) => i !== skip).map((i) => ({
    key: `10.180.0.${i}:8080`,
    value: `10.180.0.${i} . 8080`,
  })),
});
/** The map as the fake kernel holds it: slot -> value. */
const held = (fake: FakeNft) =>
  Array.from(
    { length: M },
    (_, i) => fake.table("IPv4", TABLE)!.sets.get(name)!.elements.get(String(i))?.value,
  );

async function setup() {
  const fake = new FakeNft();
  await fake.apply(`add table ip ${TABLE}\n`);
  const maps = new MaglevMaps({ family: "IPv4", tableSize: M, seed: SEED });
  const apply = (lines: string[]) =>
    lines.length > 0 ? fake.apply(lines.join("\n") + "\n") : Promise.resolve();
  return { fake, maps, apply };
}

Deno.test("maglev maps: a new table is its chain, the lookup rule and all M slots; the kernel holds the paper's table", async () => {
  const { fake, maps, apply } = await setup();
  assertEquals(name, "mh-internal/ns/web/http");
  await apply(maps.statements(want(10)));
  assertEquals(fake.table("IPv4", TABLE)!.chains.get(name)!.rules, [
    "meta l4proto { tcp, udp, sctp } th dport != 0 dnat ip to jhash ip saddr . th sport mod 1021 seed 0x00001234 map @mh-internal/ns/web/http",
  ]);
  const expected = maglevTable(want(10).endpoints.map((e) => e.key), M, SEED).map((k) =>
    k.replace(":", " . ")
  );
  assertEquals(held(fake), expected);
  assertEquals(maps.table(name), expected);
  // The same endpoints again: nothing to write.
  assertEquals(maps.statements(want(10)), []);
});

Deno.test("maglev maps: removing one of 10 endpoints rewrites only the slots that move", async () => {
  const { fake, maps, apply } = await setup();
  await apply(maps.statements(want(10)));
  const before = held(fake);
  const lines = maps.statements(want(10, 4));
  await apply(lines);
  const after = held(fake);
  const moved = before.filter((v, i) => v !== after[i]).length;
  const written = lines.filter((l) => l.startsWith("add element")).join(", ").split(" : ").length - 1;
  assertEquals(written, moved, "one add per moved slot");
  assert(!lines.some((l) => l.startsWith("add chain") || l.startsWith("add map")), "the table stays");
  // The removed endpoint's slots (a tenth) and few others.
  assert(moved >= M / 10 - 1 && moved <= M * (1 / 10 + 0.05), `${moved} of ${M} slots moved`);
  assertEquals(
    after,
    maglevTable(want(10, 4).endpoints.map((e) => e.key), M, SEED).map((k) => k.replace(":", " . ")),
  );
  assert(!after.includes("10.180.0.4 . 8080"));
});

Deno.test("maglev maps: another hash (the 3-tuple) writes the table anew; a forgotten table is written whole", async () => {
  const { fake, maps, apply } = await setup();
  await apply(maps.statements(want(3)));
  const lines = maps.statements(want(3, undefined, false));
  assert(lines.includes(`delete map ip ${TABLE} ${name}`), "nft cannot add a rule to a typeof map it holds");
  await apply(lines);
  assertEquals(fake.table("IPv4", TABLE)!.chains.get(name)!.rules, [
    "meta l4proto { tcp, udp, sctp } th dport != 0 dnat ip to jhash ip saddr mod 1021 seed 0x00001234 map @mh-internal/ns/web/http",
  ]);
  maps.forget(name);
  const again = maps.statements(want(3, undefined, false));
  assertEquals(again.filter((l) => l.startsWith("add element")).join(",").split(" : ").length - 1, M);
  await apply(again);
  assertEquals(held(fake).filter((v) => v !== undefined).length, M);
});
