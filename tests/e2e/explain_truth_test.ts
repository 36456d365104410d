/**
 * `explain` held to real packets on this kernel, in the iptables and nftables modes
 * (`explain_truth.ts`; the ipvs mode in the VM guest).
 */
import { E2E_MODES } from "./modes.ts";
import { explainTruthTest } from "./explain_truth.ts";

for (const mode of ["iptables", "nftables"] as const) {
  // The modes' sync periods; the cluster CIDR is the test's (both families).
  const args = E2E_MODES[mode].args.filter((a) => !a.startsWith("--cluster-cidr="));
  await explainTruthTest(mode, args, E2E_MODES[mode].tools);
}
