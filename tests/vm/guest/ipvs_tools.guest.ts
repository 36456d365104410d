/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): the real ipvsadm and the fake agree
 * on the same batches. On a kernel without IPVS (the host) it is skipped.
 */
import { assertEquals, assertMatch, assertRejects } from "../../support/assert.ts";
import { DenoExecutor, ExecError } from "../../../iptables/executor.ts";
import { IpvsadmRunner, IpvsError, parseSave } from "../../../iptables/ipvsadm.ts";
import { FakeIpvsadm, KERNEL_SCHEDULERS } from "../../../iptables/testing/fake_ipvsadm.ts";
import { SCHEDULERS } from "../../../proxier/model/service_port.ts";
import {
  BATCH,
  BATCH_SAVED,
  FAILING_LINES,
  IPSET_BATCH,
  IPSET_FAILING,
} from "../../../iptables/testing/ipvs_batches.ts";
import { IpsetError, IpsetRunner } from "../../../iptables/ipset.ts";
import { FakeIpset } from "../../../iptables/testing/fake_ipset.ts";
import { IpLinkRunner } from "../../../iptables/ip_link.ts";
import { FakeIpLink } from "../../../iptables/testing/fake_ip_link.ts";
import { IN_VM } from "../../support/bounds.ts";

const ignore = !IN_VM;
const exec = new DenoExecutor();

async function clear(): Promise<void> {
  await exec.run("ipvsadm", { args: ["-C"] });
}

Deno.test({
  name: "real ipvsadm and FakeIpvsadm: the same batch leaves the same table (ipvsadm -S -n)",
  ignore,
  async fn() {
    await clear();
    const real = new IpvsadmRunner({ exec });
    await real.apply(BATCH);
    const printed = (await exec.run("ipvsadm", { args: ["-S", "-n"] })).stdout;
    assertEquals(printed.trim().split("\n").sort(), BATCH_SAVED);
    const fake = new FakeIpvsadm();
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
  name: "real ipvsadm and FakeIpvsadm: failing lines give the same messages and leave the same table",
  ignore,
  async fn() {
    await clear();
    const real = new IpvsadmRunner({ exec });
    const fake = new FakeIpvsadm();
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

Deno.test({
  name:
    "real ipvsadm and FakeIpvsadm: the kernel has every scheduler the fake knows, each one a Service can ask for among them",
  ignore,
  async fn() {
    await clear();
    const real = new IpvsadmRunner({ exec });
    const fake = new FakeIpvsadm();
    const lines = [...KERNEL_SCHEDULERS].map((s, i) => `-A -t 10.0.1.${i + 1}:80 -s ${s}`);
    await real.apply(lines);
    await fake.apply(lines);
    assertEquals(
      fake.save().split("\n").sort(),
      (await exec.run("ipvsadm", { args: ["-S", "-n"] })).stdout.split("\n").sort(),
    );
    assertEquals([...SCHEDULERS].filter((s) => !KERNEL_SCHEDULERS.has(s)), []);
    await clear();
  },
});

Deno.test({
  name: "real ipset and FakeIpset: the same batches leave the same sets, failures the same messages",
  ignore,
  async fn() {
    await exec.run("ipset", { args: ["destroy"] });
    const real = new IpsetRunner({ exec });
    const fake = new FakeIpset();
    const strip = (text: string) =>
      text.replace(/ bucketsize \d+ initval 0x[0-9a-f]+/g, "").trim().split("\n").filter((l) => l !== "")
        .sort();
    const saved = async () => strip((await exec.run("ipset", { args: ["save"] })).stdout);
    await real.restore(IPSET_BATCH);
    await fake.restore(IPSET_BATCH);
    assertEquals(strip(fake.text()), await saved());
    assertEquals(
      [...(await real.save())].map(([k, v]) => [k, v.spec, [...v.entries].sort()]),
      [...(await fake.save())].map(([k, v]) => [k, v.spec, [...v.entries].sort()]),
    );
    for (const batch of IPSET_FAILING) {
      const r = await assertRejects(() => real.restore(batch), IpsetError);
      const f = await assertRejects(() => fake.restore(batch), IpsetError);
      assertEquals(
        [r.message, (r as IpsetError).line],
        [f.message, (f as IpsetError).line],
        batch.join("; "),
      );
      assertEquals(strip(fake.text()), await saved(), batch.join("; "));
    }
    await exec.run("ipset", { args: ["destroy"] });
  },
});

Deno.test({
  name: "real ip and FakeIpLink: kube-ipvs0 created up, addresses bound and unbound alike",
  ignore,
  async fn() {
    const real = new IpLinkRunner({ exec });
    const fake = new FakeIpLink();
    await real.remove();
    assertEquals(await real.addresses(), []);
    for (const l of [real, fake]) await l.ensure();
    await real.ensure(); // again: nothing to do
    const show = (await exec.run("ip", { args: ["-o", "link", "show", "dev", "kube-ipvs0"] })).stdout;
    assertMatch(show, /NOARP/);
    assertMatch(show, /[<,]UP[,>]/);
    for (const l of [real, fake]) await l.apply(["10.0.0.1", "fd00::1"], []);
    const r = await assertRejects(() => real.apply(["10.0.0.2", "10.0.0.1"], ["10.0.0.9"]), ExecError);
    const f = await assertRejects(() => fake.apply(["10.0.0.2", "10.0.0.1"], ["10.0.0.9"]), ExecError);
    assertEquals(r.message, f.message);
    assertEquals((await real.addresses()).sort(), (await fake.addresses()).sort());
    assertEquals((await real.addresses()).sort(), ["10.0.0.1", "10.0.0.2", "fd00::1"]);
    await real.remove();
    await real.remove();
    assertEquals(await real.addresses(), []);
  },
});
