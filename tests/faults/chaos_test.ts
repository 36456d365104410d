/**
 * The fault schedule with a short seed (CI), in each kernel mode this machine has; the long one is
 * `deno task bench chaos`. The ipvs mode's kernel is in the VM (not scheduled yet).
 */
import { assertEquals } from "../assert.ts";
import { realKernel } from "../e2e/netns.ts";
import { runChaos } from "./chaos.ts";

for (
  const [mode, tools] of [["iptables", ["iptables-restore", "iptables-save"]], ["nftables", ["nft"]]] as const
) {
  const { ignore, note } = await realKernel([...tools, "conntrack"]);
  Deno.test({
    name:
      `chaos ${mode}: API server faults, tool failures and no-op tools, SIGKILLs and drift under churn lose no update${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const r = await runChaos(mode, 1, 30);
      console.log(JSON.stringify(r));
      assertEquals(
        { lost: r.lost, unjustified503: r.unjustified503, unexplainedFailures: r.unexplainedFailures },
        { lost: 0, unjustified503: 0, unexplainedFailures: 0 },
        JSON.stringify(r),
      );
    },
  });
}
