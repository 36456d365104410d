/**
 * Conntrack tuning at start, as upstream's `pkg/proxy/conntrack` sysctls: the table size from
 * `maxPerCore` x CPUs (at least `min`, at most 1,048,576) raised only when lower, the hash size
 * raised to a quarter of it only when smaller, and the TCP and UDP timeouts and TCP liberal mode.
 * Null and 0 leave a value alone; a value already in place is not rewritten. Everything goes
 * through sysctl(8) (the shipped permission set cannot open /proc).
 * @module
 */
import type { Sysctl, SysctlKey } from "../../iptables/sysctl.ts";
import type { Logger } from "../runtime/logger.ts";
import type { ConntrackConfig } from "../options/config.ts";

/** Upstream's cap on nf_conntrack_max however many CPUs the node has. */
export const CONNTRACK_MAX_LIMIT = 1_048_576;

/** The conntrack sysctls, as upstream's names. */
export const NF_CONNTRACK_MAX: SysctlKey = "net.netfilter.nf_conntrack_max";
/** The hash size (upstream writes /sys/module/nf_conntrack/parameters/hashsize; the same knob). */
export const NF_CONNTRACK_BUCKETS: SysctlKey = "net.netfilter.nf_conntrack_buckets";
export const TCP_ESTABLISHED: SysctlKey = "net.netfilter.nf_conntrack_tcp_timeout_established";
export const TCP_CLOSE_WAIT: SysctlKey = "net.netfilter.nf_conntrack_tcp_timeout_close_wait";
export const TCP_BE_LIBERAL: SysctlKey = "net.netfilter.nf_conntrack_tcp_be_liberal";
export const UDP_TIMEOUT: SysctlKey = "net.netfilter.nf_conntrack_udp_timeout";
export const UDP_STREAM_TIMEOUT: SysctlKey = "net.netfilter.nf_conntrack_udp_timeout_stream";

/** Returns the nf_conntrack_max upstream wants for `cpus` CPUs; 0 leaves the kernel's. */
export function conntrackMax(c: ConntrackConfig, cpus: number): number {
  if (c.maxPerCore === null || c.maxPerCore <= 0) return 0;
  const scaled = Math.min(c.maxPerCore * cpus, CONNTRACK_MAX_LIMIT);
  return Math.max(scaled, c.min ?? 0);
}

/** What {@linkcode setConntrackSysctls} did. */
export interface ConntrackResult {
  /** `key=value` written. */
  readonly written: string[];
  /** `key=value: why` that could not be made. */
  readonly failed: string[];
}

/**
 * Applies `c`. A setting that cannot be made (a read-only /proc/sys in an unprivileged container,
 * nf_conntrack_max outside the host's network namespace) is collected, never thrown: the caller
 * names them in one warning and the proxy goes on.
 */
export async function setConntrackSysctls(
  c: ConntrackConfig,
  o: { sysctl: Sysctl; cpus: number; log: Logger },
): Promise<ConntrackResult> {
  const written: string[] = [];
  const failed: string[] = [];
  /** Writes `key` unless it already holds `value` (or, with `raiseOnly`, more). */
  const ensure = async (key: SysctlKey, value: number, raiseOnly = false) => {
    try {
      const current = Number(await o.sysctl.get(key));
      if (current === value || (raiseOnly && current > value)) return;
      o.log.info("Set sysctl", { entry: key, value });
      await o.sysctl.set(key, String(value));
      written.push(`${key}=${value}`);
    } catch (e) {
      failed.push(`${key}=${value}: ${(e as Error).message}`);
    }
  };
  const max = conntrackMax(c, o.cpus);
  if (max > 0) {
    await ensure(NF_CONNTRACK_MAX, max, true);
    // A table larger than four entries per bucket gets slow; the hash grows with it (never shrinks).
    await ensure(NF_CONNTRACK_BUCKETS, Math.floor(max / 4), true);
  }
  const seconds = (ms: number | null) => ms === null || ms <= 0 ? 0 : Math.floor(ms / 1000);
  for (
    const [key, value] of [
      [TCP_ESTABLISHED, seconds(c.tcpEstablishedTimeoutMs)],
      [TCP_CLOSE_WAIT, seconds(c.tcpCloseWaitTimeoutMs)],
      [TCP_BE_LIBERAL, c.tcpBeLiberal ? 1 : 0],
      [UDP_TIMEOUT, seconds(c.udpTimeoutMs)],
      [UDP_STREAM_TIMEOUT, seconds(c.udpStreamTimeoutMs)],
    ] as const
  ) {
    if (value > 0) await ensure(key, value);
  }
  return { written, failed };
}

/** Upstream's Event note when the conntrack limits cannot be written (its reason: `readOnlySysFS`). */
export const READ_ONLY_SYSFS_NOTE =
  "CRI error: /sys is read-only: cannot modify conntrack limits, problems may " +
  "arise later (If running Docker, see docker issue #24000)";

/**
 * Conntrack tuning at start (`conntrack:` / `--conntrack-*`), as upstream's platform set-up. A
 * setting the node refuses (a read-only /proc/sys, nf_conntrack_max outside the host's namespace)
 * is one warning naming each, and a Warning Event on the Node (`warn(reason, note)`): for the table
 * limits upstream's (`readOnlySysFS`, its note); for the timeouts, which upstream would stop at,
 * ours (`FailedToSetConntrack`). The proxy goes on either way.
 */
export async function tuneConntrack(
  c: ConntrackConfig,
  o: { sysctl: Sysctl; cpus: number; log: Logger; warn: (reason: string, note: string) => void },
): Promise<void> {
  const { failed } = await setConntrackSysctls(c, o);
  if (failed.length === 0) return;
  o.log.warn("Cannot set these conntrack settings; the kernel's values stay (problems may arise later)", {
    settings: failed,
  });
  const isLimit = (f: string) =>
    f.startsWith(`${NF_CONNTRACK_MAX}=`) || f.startsWith(`${NF_CONNTRACK_BUCKETS}=`);
  if (failed.some(isLimit)) o.warn("readOnlySysFS", READ_ONLY_SYSFS_NOTE);
  const others = failed.filter((f) => !isLimit(f));
  if (others.length > 0) {
    o.warn(
      "FailedToSetConntrack",
      `cannot modify conntrack settings, problems may arise later: ${others.join("; ")}`,
    );
  }
}

/**
 * Returns whether the kernel is liberal about out-of-window TCP packets (`nf_conntrack_tcp_be_liberal`
 * non-zero, whoever set it: `--conntrack-tcp-be-liberal` at start, the distribution, an admin). As
 * upstream, no rule then drops INVALID packets: the kernel marks only out-of-window RSTs INVALID.
 * Read after our own setting is applied; a value that cannot be read counts as not liberal (the
 * drop stays), as upstream.
 */
export async function kernelTCPLiberal(sysctl: Sysctl, log: Logger): Promise<boolean> {
  const value = await sysctl.get(TCP_BE_LIBERAL).catch(() => "");
  const liberal = /^[0-9]+$/.test(value) && Number(value) !== 0;
  if (liberal) log.info("nf_conntrack_tcp_be_liberal set, not installing DROP rules for INVALID packets");
  return liberal;
}
