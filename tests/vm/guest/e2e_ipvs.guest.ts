/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): the shared end-to-end scenarios
 * for the ipvs mode, on a kernel with IPVS, started exactly as `deno task start` starts it.
 */
import { E2E_MODES } from "../../e2e/modes.ts";
import { e2eTest } from "../../e2e/mode_test_body.ts";
import { IN_VM } from "../../support/bounds.ts";

if (IN_VM) {
  await e2eTest("ipvs", [...E2E_MODES.ipvs.args], [...E2E_MODES.ipvs.tools]);
}
