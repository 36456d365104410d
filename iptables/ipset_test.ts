import { assertEquals, assertRejects } from "../tests/support/assert.ts";
import { destroySets, type IPSet, IpsetError } from "./ipset.ts";
import { FakeIpset } from "./testing/fake_ipset.ts";

/** A fake holding sets `names`, as `ipset restore` of their create lines leaves them. */
async function holding(...names: string[]): Promise<FakeIpset> {
  const ipset = new FakeIpset();
  await ipset.restore(names.map((n) => `create ${n} hash:ip family inet6 hashsize 1024 maxelem 65536`));
  ipset.batches.length = 0;
  return ipset;
}

Deno.test("destroySets: a set the kernel lets go of a moment after its rules went is destroyed on a retry; the rest at once", async () => {
  const ipset = await holding("KUBE-6-LOOP-BACK", "KUBE-6-IPVS-IPS");
  // The kernel still holds KUBE-6-IPVS-IPS for the first two destroys, as after a rule's deletion on nf_tables.
  let held = 2;
  ipset.referenced = (name) => name === "KUBE-6-IPVS-IPS" && held-- > 0;
  await destroySets(ipset, ["KUBE-6-LOOP-BACK", "KUBE-6-IPVS-IPS"], [1, 1, 1]);
  assertEquals(ipset.text(), "");
  assertEquals(ipset.batches, [
    ["destroy KUBE-6-LOOP-BACK", "destroy KUBE-6-IPVS-IPS"],
    ["destroy KUBE-6-IPVS-IPS"],
    ["destroy KUBE-6-IPVS-IPS"],
  ]);
});

Deno.test("destroySets: a set still held once the pauses are spent fails with what ipset said", async () => {
  const ipset = await holding("KUBE-6-IPVS-IPS");
  ipset.referenced = () => true;
  const e = await assertRejects(() => destroySets(ipset, ["KUBE-6-IPVS-IPS"], [1, 1]), IpsetError);
  assertEquals(
    /Set cannot be destroyed: it is in use by a kernel component/.test(e.message),
    true,
    e.message,
  );
  assertEquals(ipset.batches.length, 3, "the first try and one after each pause");
  assertEquals(ipset.entries("KUBE-6-IPVS-IPS"), []);
});

Deno.test("destroySets: any other failure is not retried", async () => {
  let runs = 0;
  const ipset: IPSet = {
    save: () => Promise.resolve(new Map()),
    restore: () => {
      runs++;
      return Promise.reject(new IpsetError("ipset v7.17: Kernel error received: Operation not permitted", 1));
    },
  };
  await assertRejects(() => destroySets(ipset, ["KUBE-6-IPVS-IPS"], [1, 1]), IpsetError);
  assertEquals(runs, 1);
});
