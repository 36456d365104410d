/**
 * The fault schedule with a short seed (CI), in each kernel mode this machine has; the long one is
 * `deno task bench chaos`. The ipvs mode's kernel is in the VM: tests/vm/guest/chaos_ipvs.guest.ts.
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
      `chaos ${mode}: API server faults, failing, no-op and hung tools, SIGKILLs and drift under churn lose no update${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const r = await runChaos(mode, 1, 30);
      console.log(JSON.stringify(r));
      const { lost, unjustified503, unexplained, unexpectedExits } = r;
      // The failures' own lines in the diff: a failing run names what no fault explains.
      assertEquals(
        { lost, unjustified503, unexplained, unexpectedExits },
        { lost: 0, unjustified503: 0, unexplained: [], unexpectedExits: 0 },
        JSON.stringify(r),
      );
    },
  });
}
