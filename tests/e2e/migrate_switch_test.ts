/**
 * `migrate` proven by switching for real through every ordered pair of iptables, nftables and
 * userspace (iptables -> nftables -> iptables -> userspace -> nftables -> userspace -> iptables):
 * 0 misses and 0 false changes (`migrate_switch.ts`).
 * @module
 */
import { assertEquals } from "../support/assert.ts";
import { realKernel } from "../support/namespace.ts";
import { migrateSwitch } from "./migrate_switch.ts";

const kernel = await realKernel(["nft", "iptables-nft-save", "iptables-nft-restore", "conntrack"]);

Deno.test({
  name:
    `e2e migrate proven by switching for real: every ordered pair of iptables, nftables and userspace, 0 misses and 0 false changes${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { counts, wrong } = await migrateSwitch([
      "iptables",
      "nftables",
      "iptables",
      "userspace",
      "nftables",
      "userspace",
      "iptables",
    ]);
    console.log(counts.join("\n"));
    assertEquals(wrong, []);
  },
});
