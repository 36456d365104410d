import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { assertEquals } from "../../tests/support/assert.ts";
import { iptablesSetup } from "../../tests/flows/iptables_datapath.ts";
import { cleanupIptables } from "./cleanup.ts";

Deno.test("cleanupIptables removes kube-proxy's chains and keeps other components' KUBE- chains", async () => {
  const { fake, proxier } = iptablesSetup();
  await proxier.syncNow();
  // What kubelet creates: its canary, and (older kubelets) a rule of its own using KUBE-MARK-MASQ.
  await fake.restoreAll(
    "*nat\n:KUBE-KUBELET-CANARY - [0:0]\n:KUBE-HOSTPORTS - [0:0]\n-A KUBE-HOSTPORTS -j KUBE-MARK-MASQ\nCOMMIT\n",
    { flush: false, counters: false },
  );
  await cleanupIptables(fake);
  assertEquals(fake.chains("nat").filter((c) => c.startsWith("KUBE-")), [
    "KUBE-MARK-MASQ",
    "KUBE-KUBELET-CANARY",
    "KUBE-HOSTPORTS",
  ]);
  assertEquals(fake.chains("filter").filter((c) => c.startsWith("KUBE-")), []);
  await cleanupIptables(fake);
  // Without the foreign jump, KUBE-MARK-MASQ goes too.
  const alone = new FakeIPTables();
  await alone.restoreAll(
    "*nat\n:KUBE-MARK-MASQ - [0:0]\n-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\nCOMMIT\n",
    {
      flush: false,
      counters: false,
    },
  );
  await cleanupIptables(alone);
  assertEquals(alone.chains("nat").filter((c) => c.startsWith("KUBE-")), []);
});
