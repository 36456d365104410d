import { assert, assertEquals, assertMatch, assertRejects } from "../../tests/support/assert.ts";
import { RestoreError } from "../iptables.ts";
import { FakeIPTables } from "./fake_iptables.ts";

const BASE = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m comment --comment "a b" -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -j DNAT --to-destination 10.180.0.1:80
COMMIT
`;

Deno.test("FakeIPTables: restore creates chains and rules; save renders them like iptables-save", async () => {
  const f = new FakeIPTables();
  await f.restoreAll(BASE, { flush: false, counters: false });
  assertEquals(
    await f.save("nat"),
    `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m comment --comment "a b" -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -j DNAT --to-destination 10.180.0.1:80
COMMIT
`,
  );
});

Deno.test("FakeIPTables: --noflush keeps undeclared chains; declaring a chain flushes it; flush mode drops all", async () => {
  const f = new FakeIPTables();
  await f.restoreAll(BASE, { flush: false, counters: false });
  await f.restoreAll("*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-A\nCOMMIT\n", {
    flush: false,
    counters: false,
  });
  assertEquals(f.rules("nat", "KUBE-SERVICES"), ["-j KUBE-SVC-A"]);
  assertEquals(f.rules("nat", "KUBE-SVC-A"), ["-j DNAT --to-destination 10.180.0.1:80"]);
  await f.restoreAll("*nat\n:X - [0:0]\nCOMMIT\n", { flush: true, counters: false });
  assertEquals(f.chains("nat"), ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING", "X"]);
});

Deno.test("FakeIPTables: -X deletes an unreferenced chain", async () => {
  const f = new FakeIPTables();
  await f.restoreAll(BASE, { flush: false, counters: false });
  await f.restoreAll("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n-X KUBE-SVC-A\nCOMMIT\n", {
    flush: false,
    counters: false,
  });
  assertEquals(f.rules("nat", "KUBE-SVC-A"), undefined);
});

Deno.test("FakeIPTables: a jump to a missing chain is rejected and the previous state kept", async () => {
  const f = new FakeIPTables();
  await f.restoreAll(BASE, { flush: false, counters: false });
  const before = await f.save("nat");
  const e = await assertRejects(
    () =>
      f.restoreAll("*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-MISSING\nCOMMIT\n", {
        flush: false,
        counters: false,
      }),
    RestoreError,
  );
  assertMatch(e.message, /line 3 failed: nat chain KUBE-SERVICES jumps to missing chain KUBE-SVC-MISSING/);
  assertEquals(e.line, "-A KUBE-SERVICES -j KUBE-SVC-MISSING");
  assertEquals(await f.save("nat"), before);
});

Deno.test("FakeIPTables: deleting a referenced chain is rejected and the previous state kept", async () => {
  const f = new FakeIPTables();
  await f.restoreAll(BASE, { flush: false, counters: false });
  const before = await f.save("nat");
  const e = await assertRejects(
    () =>
      f.restoreAll("*nat\n:KUBE-SVC-A - [0:0]\n-X KUBE-SVC-A\nCOMMIT\n", { flush: false, counters: false }),
    RestoreError,
  );
  assertMatch(e.message, /chain KUBE-SVC-A is referenced by KUBE-SERVICES/);
  assertEquals(await f.save("nat"), before);
});

Deno.test("FakeIPTables: malformed input is rejected", async () => {
  const f = new FakeIPTables();
  for (
    const bad of [
      "-A X -j ACCEPT\n",
      "*nat\n-A NOPE -j ACCEPT\nCOMMIT\n",
      "*nat\n:X - [0:0]\n",
      "*bogus\nCOMMIT\n",
      '*nat\n:X - [0:0]\n-A X -m comment --comment "open\nCOMMIT\n',
    ]
  ) {
    await assertRejects(() => f.restoreAll(bad, { flush: false, counters: false }), RestoreError);
  }
  assert(f.rules("nat", "X") === undefined);
});

Deno.test("FakeIPTables: ensureChain, ensureRule, deleteRule are idempotent", async () => {
  const f = new FakeIPTables();
  assertEquals(await f.ensureChain("nat", "KUBE-SERVICES"), false);
  assertEquals(await f.ensureChain("nat", "KUBE-SERVICES"), true);
  const args = ["-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"];
  assertEquals(await f.ensureRule("prepend", "nat", "PREROUTING", args), false);
  assertEquals(await f.ensureRule("prepend", "nat", "PREROUTING", args), true);
  assertEquals(f.rules("nat", "PREROUTING"), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  ]);
  await f.deleteRule("nat", "PREROUTING", args);
  await f.deleteRule("nat", "PREROUTING", args);
  assertEquals(f.rules("nat", "PREROUTING"), []);
  await assertRejects(() => f.ensureRule("append", "nat", "OUTPUT", ["-j", "KUBE-NOPE"]), Error);
});
