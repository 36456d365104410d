/**
 * The kernel tools the proxy runs in every mode for its process-wide set-up (upstream's
 * platformSetup): checked at start beside the mode's own.
 * @module
 */
import type { ProxyConfig } from "../../options/config.ts";
import type { ToolNeed } from "../../runtime/kernel_tools.ts";

/** Tools the program runs in every mode for its process-wide set-up (upstream's platformSetup). */
export const PROCESS_TOOLS: readonly ToolNeed<ProxyConfig>[] = [
  {
    tool: "sysctl",
    required: false,
    without:
      "the conntrack settings (--conntrack-*, conntrack:) cannot be made (Debian/Ubuntu package procps)",
    when: (c) => {
      const t = c.conntrack;
      return [t.tcpEstablishedTimeoutMs, t.tcpCloseWaitTimeoutMs, t.udpTimeoutMs, t.udpStreamTimeoutMs]
        .some((ms) => (ms ?? 0) > 0) || t.tcpBeLiberal || (t.maxPerCore ?? 0) > 0;
    },
  },
  {
    tool: "choom",
    required: false,
    without: "--oom-score-adj cannot be applied (Debian/Ubuntu package util-linux)",
    when: (c) => c.oomScoreAdj !== null,
  },
];
