import { assert, assertEquals } from "../../tests/support/assert.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { maglevTable } from "../../loadbalancer/maglev.ts";
import { TABLE } from "./layout.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import { MaglevMaps, maglevName, type MaglevWant } from "./maglev_maps.ts";

const M = 1021;
const SEED = 0x1234;
const PORT = { namespace: "ns", name: "web", port: "http", protocol: "TCP" } as const;
const name = maglevName("internal", PORT, { tableSize: M, seed: SEED }, true);
const want = (n: number, skip?: number, sourcePort = true): MaglevWant => ({
  name: sourcePort ? name : maglevName("internal", PORT, { tableSize: M, seed: SEED }, false),
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

/** The statements `maps` writes for `w`, one per line. */
function lines(maps: MaglevMaps, w: MaglevWant): string[] {
  const tx = new NftTransaction("IPv4", TABLE);
  maps.write(tx, w);
  return tx.text().split("\n").filter((l) => l !== "");
}

async function setup() {
  const fake = new FakeNft();
  await fake.apply(`add table ip ${TABLE}\n`);
  const maps = new MaglevMaps({ family: "IPv4", tableSize: M, seed: SEED });
  const apply = (ls: string[]) => ls.length > 0 ? fake.apply(ls.join("\n") + "\n") : Promise.resolve();
  return { fake, maps, apply };
}

Deno.test("maglev maps: a new table is its chain, the lookup rule and all M slots; the kernel holds the paper's table", async () => {
  const { fake, maps, apply } = await setup();
  assertEquals(name, "mh-internal/ns/web/http/m1021-s00001234-5t");
  await apply(lines(maps, want(10)));
  assertEquals(fake.table("IPv4", TABLE)!.chains.get(name)!.rules, [
    `meta l4proto { tcp, udp, sctp } th dport != 0 dnat ip to jhash ip saddr . th sport mod 1021 seed 0x00001234 map @${name}`,
  ]);
  const expected = maglevTable(want(10).endpoints.map((e) => e.key), M, SEED).map((k) =>
    k.replace(":", " . ")
  );
  assertEquals(held(fake), expected);
  assertEquals(maps.table(name), expected);
  // The same endpoints again: nothing to write.
  assertEquals(lines(maps, want(10)), []);
});

Deno.test("maglev maps: removing one of 10 endpoints rewrites only the slots that move", async () => {
  const { fake, maps, apply } = await setup();
  await apply(lines(maps, want(10)));
  const before = held(fake);
  const written0 = lines(maps, want(10, 4));
  await apply(written0);
  const after = held(fake);
  const moved = before.filter((v, i) => v !== after[i]).length;
  const written = written0.filter((l) => l.startsWith("add element")).join(", ").split(" : ").length - 1;
  assertEquals(written, moved, "one add per moved slot");
  assert(!written0.some((l) => l.startsWith("add chain") || l.startsWith("add map")), "the table stays");
  // The removed endpoint's slots (a tenth) and few others.
  assert(moved >= M / 10 - 1 && moved <= M * (1 / 10 + 0.05), `${moved} of ${M} slots moved`);
  assertEquals(
    after,
    maglevTable(want(10, 4).endpoints.map((e) => e.key), M, SEED).map((k) => k.replace(":", " . ")),
  );
  assert(!after.includes("10.180.0.4 . 8080"));
});

Deno.test("maglev maps: the hash's parameters are in the name; a table read back from the kernel is updated slot by slot", async () => {
  assertEquals(
    maglevName("external-cluster", { ...PORT, port: "" }, { tableSize: 16381, seed: 0x6b707264 }, false),
    "mh-external-cluster/ns/web/m16381-s6b707264-3t",
  );
  const { fake, maps, apply } = await setup();
  await apply(lines(maps, want(10)));
  // Another run of the proxy: it reads the table back, then writes only what moved.
  const again = new MaglevMaps({ family: "IPv4", tableSize: M, seed: SEED });
  const listed = [...fake.table("IPv4", TABLE)!.sets.get(name)!.elements].map(([k, v]) => ({
    key: [k],
    value: v.value.split(" . "),
  }));
  assertEquals(again.adopt(name, listed.slice(1)), false, "an incomplete table is not taken");
  assertEquals(again.adopt(name, listed), true);
  assertEquals(lines(again, want(10)), []);
  const moved = lines(again, want(10, 4));
  assert(moved.length > 0 && !moved.some((l) => l.startsWith("add map")));
  await apply(moved);
  assertEquals(
    held(fake),
    maglevTable(want(10, 4).endpoints.map((e) => e.key), M, SEED).map((k) => k.replace(":", " . ")),
  );
});
