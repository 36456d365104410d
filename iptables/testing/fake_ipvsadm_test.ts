import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { IpvsError } from "../ipvsadm.ts";
import { FakeIpvsadm } from "./fake_ipvsadm.ts";
import { BATCH, BATCH_SAVED, FAILING_LINES } from "./ipvs_batches.ts";

Deno.test("FakeIpvsadm applies ipvsadm -R batches and prints what ipvsadm -S -n prints", async () => {
  const f = new FakeIpvsadm();
  await f.apply(BATCH);
  assertEquals(f.save().trim().split("\n").sort(), BATCH_SAVED);
  assertEquals((await f.read()).length, 3);
});

Deno.test("FakeIpvsadm, as ipvsadm -R: a failing line is skipped with ipvsadm's message, the others apply", async () => {
  const f = new FakeIpvsadm();
  const e = await assertRejects(
    () => f.apply(["-A -t 10.0.0.9:80 -s rr", "-A -t 10.0.0.9:80 -s rr", "-A -t 10.0.0.10:80 -s rr"]),
    IpvsError,
  );
  assertEquals([e.message, (e as IpvsError).line], [
    "ipvsadm -R: Service already exists",
    "-A -t 10.0.0.9:80 -s rr",
  ]);
  assertEquals(f.save(), "-A -t 10.0.0.9:80 -s rr\n-A -t 10.0.0.10:80 -s rr\n");
  for (const [line, msg] of FAILING_LINES) {
    const err = await assertRejects(() => f.apply([line]), IpvsError);
    assertEquals(err.message, `ipvsadm -R: ${msg}`);
  }
});

Deno.test("FakeIpvsadm: connection counts and counters move by hand and read back through the parsers", async () => {
  const f = new FakeIpvsadm();
  await f.apply(BATCH);
  f.setConnections("TCP/10.0.0.1:80", "10.1.0.1:8080", 2, 5);
  f.setStats("TCP/10.0.0.1:80", { connections: 9, packetsIn: 1, packetsOut: 2, bytesIn: 3, bytesOut: 4 });
  assertEquals((await f.connections()).get("TCP/10.0.0.1:80|10.1.0.1:8080"), { active: 2, inactive: 5 });
  assertEquals((await f.stats()).get("TCP/10.0.0.1:80")?.connections, 9);
});
