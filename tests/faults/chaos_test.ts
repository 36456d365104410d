/**
 * The fault schedule with a short seed (CI), in each kernel mode this machine has, iptables mode
 * with both backends (only iptables-legacy waits for the xtables lock); the long one is `deno task
 * bench chaos`. The ipvs mode's kernel is in the VM: tests/vm/guest/chaos_ipvs.guest.ts.
 */
import { assertEquals } from "../support/assert.ts";
import { realKernel } from "../support/namespace.ts";
import { runChaos } from "./chaos.ts";
import type { IptablesBackendName } from "../../iptables/iptables.ts";

const RUNS: ReadonlyArray<{ mode: "iptables" | "nftables"; backend?: IptablesBackendName; tools: string[] }> =
  [
    { mode: "iptables", backend: "nft", tools: ["iptables-restore", "iptables-save"] },
    {
      mode: "iptables",
      backend: "legacy",
      tools: ["iptables-legacy-restore", "iptables-legacy-save", "flock"],
    },
    { mode: "nftables", tools: ["nft"] },
  ];

for (const { mode, backend, tools } of RUNS) {
  const { ignore, note } = await realKernel([...tools, "conntrack"]);
  Deno.test({
    name: `chaos ${mode}${
      backend !== undefined ? ` (${backend} backend)` : ""
    }: API server faults, failing, no-op and hung tools, the xtables lock held, SIGKILLs and drift under churn lose no update${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const r = await runChaos(mode, 1, 30, { iptablesBackend: backend });
      console.log(JSON.stringify(r));
      const { lost, unjustified503, unexplained, unexpectedExits, notRun } = r;
      // The failures' own lines in the diff: a failing run names what no fault explains, and every
      // kind the title names ran (the schedule opens with each, at any pace).
      assertEquals(
        { lost, unjustified503, unexplained, unexpectedExits, notRun },
        { lost: 0, unjustified503: 0, unexplained: [], unexpectedExits: 0, notRun: [] },
        JSON.stringify(r),
      );
    },
  });
}
