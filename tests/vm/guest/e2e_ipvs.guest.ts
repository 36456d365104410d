/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): the shared end-to-end scenarios
 * for the ipvs mode, on a kernel with IPVS, started exactly as `deno task start` starts it.
 */
import { e2eTest } from "../../e2e/mode_test_body.ts";

if (Deno.env.get("KPD_IN_VM") === "1") {
  await e2eTest(
    "ipvs",
    ["--cluster-cidr=10.180.0.0/16", "--ipvs-min-sync-period=100ms"],
    ["ipvsadm", "ipset", "ip", "iptables-restore", "iptables-save", "conntrack", "sysctl"],
  );
}
