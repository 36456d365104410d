/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): `migrate` proven by switching for
 * real through every ordered pair of ipvs with iptables, nftables and userspace (ipvs -> iptables ->
 * ipvs -> nftables -> ipvs -> userspace -> ipvs), the scenario of `tests/e2e/migrate_switch.ts`:
 * 0 misses and 0 false changes.
 */
import { assertEquals } from "../../support/assert.ts";
import { IN_VM } from "../../support/bounds.ts";
import { migrateSwitch } from "../../e2e/migrate_switch.ts";

Deno.test({
  name: "migrate proven by switching for real: every ordered pair with ipvs, 0 misses and 0 false changes",
  ignore: !IN_VM,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { counts, wrong } = await migrateSwitch([
      "ipvs",
      "iptables",
      "ipvs",
      "nftables",
      "ipvs",
      "userspace",
      "ipvs",
    ]);
    console.log(counts.join("\n"));
    assertEquals(wrong, []);
  },
});
