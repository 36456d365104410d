/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): `explain` held to real packets in
 * the ipvs mode, on a kernel with IPVS (`tests/e2e/explain_truth.ts`).
 */
import { E2E_MODES } from "../../e2e/modes.ts";
import { explainTruthTest } from "../../e2e/explain_truth.ts";
import { IN_VM } from "../../support/bounds.ts";

if (IN_VM) {
  const { args, tools } = E2E_MODES.ipvs;
  await explainTruthTest("ipvs", args.filter((a) => !a.startsWith("--cluster-cidr=")), [...tools]);
}
