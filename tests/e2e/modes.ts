/**
 * The end-to-end list: per mode, the flags that differ (every run adds the source, node name and
 * server addresses), the tools its scenarios need (conntrack: the stale-UDP scenario; sysctl:
 * NodePorts on 127.0.0.1) and where it runs: here, or in the qemu guest for kernels this machine
 * lacks (IPVS). Typed by the one mode list, so a mode cannot be left out.
 * @module
 */
import type { ProxyMode } from "../../proxier/options/config.ts";

/** How one mode's end-to-end test runs. */
export interface E2EMode {
  readonly args: readonly string[];
  readonly tools: readonly string[];
  /** `host`: `e2e_test.ts` here; `vm`: `tests/vm/ipvs_vm_test.ts` in the guest. */
  readonly where: "host" | "vm";
}

/** Every mode's end-to-end test. */
export const E2E_MODES: Readonly<Record<ProxyMode, E2EMode>> = {
  iptables: {
    // A short sync period: the drift scenario waits for the periodic check.
    args: ["--cluster-cidr=10.180.0.0/16", "--iptables-min-sync-period=100ms", "--iptables-sync-period=2s"],
    tools: ["iptables-restore", "iptables-save", "conntrack", "sysctl"],
    where: "host",
  },
  ipvs: {
    args: ["--cluster-cidr=10.180.0.0/16", "--ipvs-min-sync-period=100ms", "--ipvs-sync-period=2s"],
    tools: ["ipvsadm", "ipset", "ip", "iptables-restore", "iptables-save", "conntrack", "sysctl"],
    where: "vm",
  },
  nftables: {
    args: ["--cluster-cidr=10.180.0.0/16", "--iptables-min-sync-period=100ms", "--iptables-sync-period=2s"],
    tools: ["nft", "conntrack"],
    where: "host",
  },
  userspace: {
    args: ["--proxy-port-range=40000-40100", "--iptables-min-sync-period=100ms"],
    tools: ["iptables-restore", "iptables-save"],
    where: "host",
  },
};
