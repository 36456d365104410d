/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): the fault schedule's short seed in
 * ipvs mode, on a kernel with IPVS.
 */
import { assertEquals } from "../../support/assert.ts";
import { runChaos } from "../../faults/chaos.ts";
import { IN_VM } from "../../support/bounds.ts";

Deno.test({
  name:
    "chaos ipvs: API server faults, failing, no-op and hung tools, SIGKILLs and drift under churn lose no update",
  ignore: !IN_VM,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const r = await runChaos("ipvs", 1, 30);
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
