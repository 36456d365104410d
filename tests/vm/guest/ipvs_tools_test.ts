/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): the real ipvsadm and the fake agree
 * on the same batches. On a kernel without IPVS (the host) it is skipped.
 */
import { assertEquals, assertRejects } from "../../assert.ts";
import { DenoExecutor } from "../../../iptables/executor.ts";
import { IpvsadmRunner, IpvsError, parseSave } from "../../../iptables/ipvs.ts";
import { FakeIpvs } from "../../../iptables/testing/fake_ipvs.ts";
import { BATCH, BATCH_SAVED, FAILING_LINES } from "../../../iptables/testing/ipvs_batches.ts";

const ignore = Deno.env.get("KPD_IN_VM") !== "1";
const exec = new DenoExecutor();

async function clear(): Promise<void> {
  await exec.run("ipvsadm", { args: ["-C"] });
}

Deno.test({
  name: "real ipvsadm and FakeIpvs: the same batch leaves the same table (ipvsadm -S -n)",
  ignore,
  async fn() {
    await clear();
    const real = new IpvsadmRunner({ exec });
    await real.apply(BATCH);
    const printed = (await exec.run("ipvsadm", { args: ["-S", "-n"] })).stdout;
    assertEquals(printed.trim().split("\n").sort(), BATCH_SAVED);
    const fake = new FakeIpvs();
    await fake.apply(BATCH);
    assertEquals(fake.save().trim().split("\n").sort(), printed.trim().split("\n").sort());
    assertEquals(
      (await real.read()).map((s) => JSON.stringify(s)).sort(),
      parseSave(fake.save()).map((s) => JSON.stringify(s)).sort(),
    );
    // Counters and connection listings parse on the real output too.
    assertEquals(
      [...(await real.connections()).keys()].sort(),
      [...(await fake.connections()).keys()].sort(),
    );
    assertEquals([...(await real.stats()).keys()].sort(), [...(await fake.stats()).keys()].sort());
  },
});

Deno.test({
  name: "real ipvsadm and FakeIpvs: failing lines give the same messages and leave the same table",
  ignore,
  async fn() {
    await clear();
    const real = new IpvsadmRunner({ exec });
    const fake = new FakeIpvs();
    const setup = ["-A -t 10.0.0.9:80 -s rr", "-A -t 10.0.0.9:80 -s rr", "-A -t 10.0.0.10:80 -s rr"];
    const batches = [setup, ...FAILING_LINES.map(([line]) => [line])];
    for (const batch of batches) {
      const r = await assertRejects(() => real.apply(batch), IpvsError);
      const f = await assertRejects(() => fake.apply(batch), IpvsError);
      assertEquals(r.message, f.message, batch.join("; "));
      const printed = (await exec.run("ipvsadm", { args: ["-S", "-n"] })).stdout;
      assertEquals(fake.save().split("\n").sort(), printed.split("\n").sort(), batch.join("; "));
    }
    await clear();
  },
});
