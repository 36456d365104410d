/**
 * Command line parsing into one {@linkcode ProxyConfig}. Flag names, defaults and meanings follow
 * upstream kube-proxy.
 * @module
 */
import { parseArgs } from "node:util";
import { UsageError } from "../errors.ts";
import { applyConfigFile } from "./config_file.ts";
import { defaultConfig, MAX_TCP_WORKERS, type ProxyConfig } from "./config.ts";
import {
  durationFlag,
  intFlag,
  parseBackend,
  parseBind,
  parseCIDRs,
  parseIP,
  parseLocalMode,
  parseMode,
  parseNodeName,
  parseNodePortAddresses,
  parsePortRange,
  parseScheduler,
  parseSource,
  parseURL,
} from "./values.ts";

/** What the command line asks for. */
export interface ParsedCommand {
  readonly command: "run" | "render" | "trace" | "cleanup" | "version" | "help";
  /** Set for `trace`. */
  readonly trace?: TraceQuery;
  readonly config: ProxyConfig;
  /** Non-fatal remarks to log once logging is set up (e.g. flags ignored because of --config). */
  readonly warnings: string[];
  /** Path given to --config, if any (its content is already merged into `config`). */
  readonly configFile?: string;
}

/** Flags of the `trace` command only. */
const TRACE_FLAGS = ["src", "dst", "dport", "proto", "from", "rules", "output", "node-ip"] as const;

/** What `trace` is asked: one new connection, and where the rules come from. */
export interface TraceQuery {
  readonly src?: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: "tcp" | "udp" | "sctp";
  /** pod: from a pod on this node; external: from another host; node: from this node itself. */
  readonly from: "pod" | "node" | "external";
  /** A saved (`iptables-save`) or rendered rules file; unset: the live rules of this namespace. */
  readonly rulesFile?: string;
  readonly output: "text" | "json";
  /** This node's addresses, besides those of its interfaces (for a file from another node). */
  readonly nodeIPs: readonly string[];
}

const STRING_FLAGS = [
  "proxy-mode",
  "kubeconfig",
  "master",
  "hostname-override",
  "bind-address",
  "cluster-cidr",
  "nodeport-addresses",
  "iptables-sync-period",
  "iptables-min-sync-period",
  "iptables-masquerade-bit",
  "iptables-backend",
  "config-sync-period",
  "healthz-bind-address",
  "metrics-bind-address",
  "udp-timeout",
  "tcp-idle-timeout",
  "tcp-write-timeout",
  "userspace-tcp-workers",
  "proxy-port-range",
  "detect-local-mode",
  "config",
  "v",
  "logging-format",
  "source",
  "ipvs-scheduler",
  "ipvs-exclude-cidrs",
  "ipvs-tcp-timeout",
  "ipvs-tcpfin-timeout",
  "ipvs-udp-timeout",
  "ipvs-sync-period",
  "ipvs-min-sync-period",
  ...TRACE_FLAGS,
] as const;
const BOOL_FLAGS = [
  "masquerade-all",
  "iptables-localhost-nodeports",
  "userspace-portals",
  "ipvs-strict-arp",
  "cleanup",
  "version",
  "help",
] as const;

/** Usage text for `--help`. */
export const USAGE = `Usage: kube-proxy-deno [render] [flags]

Makes Kubernetes Services reachable on this node (a drop-in kube-proxy).

Commands:
  (none)    run the proxy
  render    print what a full sync of --proxy-mode would apply (iptables-restore input, nft
            transaction), touching nothing

Flags (upstream kube-proxy names and defaults):
  --proxy-mode=iptables|nftables|ipvs|userspace   datapath (default iptables)
  --source=kubernetes|file:PATH          where objects come from (default kubernetes)
  --kubeconfig=PATH  --master=URL        API server access (default: in-cluster, else $KUBECONFIG,
                                         else ~/.kube/config; client certificate, token or basic auth)
  --hostname-override=NAME               this node's name (default: the hostname)
  --bind-address=IP                      userspace listen address (default 0.0.0.0)
  --cluster-cidr=CIDR[,CIDR]             pod CIDRs, to tell local traffic from external
  --detect-local-mode=ClusterCIDR|NodeCIDR
                                         how traffic from local pods is told apart: by --cluster-cidr
                                         (default), or by the Node's spec.podCIDRs
  --nodeport-addresses=CIDR[,CIDR]       addresses NodePorts answer on (default all)
  --masquerade-all                       SNAT all traffic to service IPs
  --iptables-masquerade-bit=14           fwmark bit for masquerading (0-31)
  --iptables-localhost-nodeports=true    allow NodePorts on 127.0.0.1
  --iptables-backend=auto|nft|legacy     iptables backend; auto: the one the host's rules are in
                                         (kubelet's chains first, else more rules; nft when none)
  --iptables-sync-period=30s             interval of periodic (partial) resyncs; full ones hourly
  --iptables-min-sync-period=1s          minimum interval between syncs
  --config-sync-period=15m               informer resync period
  --healthz-bind-address=0.0.0.0:10256   health server ("" disables)
  --metrics-bind-address=127.0.0.1:10249 metrics server ("" disables)
  --userspace-portals=true               userspace: REDIRECT cluster/external IPs (false: NodePorts only)
  --ipvs-scheduler=rr                    ipvs: rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh
  --ipvs-exclude-cidrs=CIDR[,CIDR]       ipvs: virtual servers there are never touched
  --ipvs-strict-arp=false                ipvs: arp_ignore=1, arp_announce=2
  --ipvs-tcp-timeout=0s --ipvs-tcpfin-timeout=0s --ipvs-udp-timeout=0s   ipvs: 0 keeps the kernel's
  --ipvs-sync-period=30s --ipvs-min-sync-period=0s                       ipvs mode's sync periods
  --udp-timeout=250ms                    userspace UDP session idle timeout
  --tcp-idle-timeout=1h                  userspace: close a TCP connection idle this long (0: never)
  --tcp-write-timeout=60s                userspace: close a TCP connection whose peer stopped reading
  --userspace-tcp-workers=N              userspace: threads serving TCP (0: the main thread; default: 2 per core, up to 8)
  --proxy-port-range=MIN-MAX|MIN+N       userspace portal ports (default random)
  --config=PATH                          KubeProxyConfiguration file; other flags are then ignored
  --cleanup                              remove every rule kube-proxy(-deno) created, then exit
  --v=0                                  log verbosity (4 and above: debug)
  --logging-format=text|json
  --version  --help
`;

/** The version this build reports. */
export const VERSION = "0.1.0";

/**
 * Parses the command line (without the program name).
 * @throws {UsageError} for any unknown flag or bad value; the message names both.
 */
export function parseCommandLine(argv: readonly string[], readFile = Deno.readTextFileSync): ParsedCommand {
  const { args, bools } = splitBooleans(argv);
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: Object.fromEntries([
        ...STRING_FLAGS.map((f) => [f, { type: "string" as const }]),
        ...BOOL_FLAGS.map((f) => [f, { type: "boolean" as const }]),
      ]),
    });
  } catch (e) {
    throw new UsageError((e as Error).message.replace(/\. To specify a positional.*$/s, ""), { cause: e });
  }
  const v = { ...parsed.values, ...bools } as Record<string, string | boolean | undefined>;
  const positionals = parsed.positionals;
  if (positionals.length > 0 && positionals[0] !== "render" && positionals[0] !== "trace") {
    throw new UsageError(`unknown command ${JSON.stringify(positionals[0])} ("render" or "trace")`);
  }
  if (positionals.length > 1) {
    throw new UsageError(
      `${positionals[0]}: unexpected argument ${JSON.stringify(positionals[1])} (${
        positionals[0]
      } takes flags only)`,
    );
  }
  const trace = positionals[0] === "trace" ? parseTrace(v) : undefined;
  if (trace === undefined) {
    const misplaced = TRACE_FLAGS.find((f) => v[f] !== undefined);
    if (misplaced !== undefined) throw new UsageError(`--${misplaced}: only the trace command takes it`);
  }
  const warnings: string[] = [];
  const config = defaultConfig();
  const configFile = v["config"] as string | undefined;
  if (configFile !== undefined) {
    const others = Object.keys(v).filter((k) =>
      ![
        "config",
        "hostname-override",
        "v",
        "logging-format",
        "cleanup",
        "version",
        "help",
        "source",
        "iptables-backend",
      ].includes(k)
    );
    if (others.length > 0) {
      warnings.push(`--config is set: ignoring flags ${others.map((k) => `--${k}`).join(", ")}`);
    }
    let text: string;
    try {
      text = readFile(configFile);
    } catch (e) {
      throw new UsageError(`--config: cannot read ${JSON.stringify(configFile)}: ${(e as Error).message}`, {
        cause: e,
      });
    }
    applyConfigFile(config, text, configFile);
  } else {
    applyFlags(config, v);
  }
  // These apply with or without --config: they are about this process, not the proxy
  // (upstream also honours --hostname-override beside --config, as kubeadm's manifest relies on).
  if (configFile !== undefined && v["hostname-override"] !== undefined) {
    config.hostnameOverride = parseNodeName("--hostname-override", v["hostname-override"] as string);
  }
  if (v["v"] !== undefined) config.verbosity = intFlag("--v", v["v"] as string, 0, 10);
  if (v["logging-format"] !== undefined) {
    const f = v["logging-format"];
    if (f !== "text" && f !== "json") {
      throw new UsageError(`--logging-format: invalid value ${JSON.stringify(f)} (text or json)`);
    }
    config.loggingFormat = f;
  }
  if (v["source"] !== undefined) config.source = parseSource(v["source"] as string);
  if (v["iptables-backend"] !== undefined) {
    config.iptablesBackend = parseBackend("--iptables-backend", v["iptables-backend"] as string);
  }
  if (config.minSyncPeriodMs > config.syncPeriodMs) {
    throw new UsageError(
      `--iptables-min-sync-period (${config.minSyncPeriodMs}ms) must not exceed --iptables-sync-period (${config.syncPeriodMs}ms)`,
    );
  }
  const command = v["help"]
    ? "help"
    : v["version"]
    ? "version"
    : v["cleanup"]
    ? "cleanup"
    : positionals[0] === "render"
    ? "render"
    : positionals[0] === "trace"
    ? "trace"
    : "run";
  return { command, config, warnings, configFile, trace };
}

/**
 * pflag accepts `--flag=true|false` for booleans; node's parseArgs does not. Returns the other
 * arguments and the booleans given that way.
 */
function splitBooleans(argv: readonly string[]): { args: string[]; bools: Record<string, boolean> } {
  const args: string[] = [];
  const bools: Record<string, boolean> = {};
  for (const a of argv) {
    const m = /^--([a-z-]+)=(.*)$/s.exec(a);
    if (m === null || !(BOOL_FLAGS as readonly string[]).includes(m[1])) {
      args.push(a);
    } else if (m[2] === "true" || m[2] === "false") {
      bools[m[1]] = m[2] === "true";
    } else {
      throw new UsageError(`--${m[1]}: invalid boolean ${JSON.stringify(m[2])} (true or false)`);
    }
  }
  return { args, bools };
}

function applyFlags(c: ProxyConfig, v: Record<string, string | boolean | undefined>): void {
  const s = (k: string) => v[k] as string | undefined;
  if (s("proxy-mode") !== undefined) c.mode = parseMode("--proxy-mode", s("proxy-mode")!);
  if (s("kubeconfig") !== undefined) c.kubeconfig = s("kubeconfig")!;
  if (s("master") !== undefined) c.master = parseURL("--master", s("master")!);
  if (s("hostname-override") !== undefined) {
    c.hostnameOverride = parseNodeName("--hostname-override", s("hostname-override")!);
  }
  if (s("bind-address") !== undefined) c.bindAddress = parseIP("--bind-address", s("bind-address")!);
  if (s("cluster-cidr") !== undefined) c.clusterCIDRs = parseCIDRs("--cluster-cidr", s("cluster-cidr")!);
  if (s("nodeport-addresses") !== undefined) {
    c.nodePortAddresses = parseNodePortAddresses("--nodeport-addresses", s("nodeport-addresses")!);
  }
  if (v["masquerade-all"] !== undefined) c.masqueradeAll = v["masquerade-all"] as boolean;
  if (v["userspace-portals"] !== undefined) c.userspacePortals = v["userspace-portals"] as boolean;
  if (v["iptables-localhost-nodeports"] !== undefined) {
    c.localhostNodePorts = v["iptables-localhost-nodeports"] as boolean;
  }
  if (s("iptables-masquerade-bit") !== undefined) {
    c.masqueradeBit = intFlag("--iptables-masquerade-bit", s("iptables-masquerade-bit")!, 0, 31);
  }
  if (s("detect-local-mode") !== undefined) {
    c.detectLocalMode = parseLocalMode("--detect-local-mode", s("detect-local-mode")!);
  }
  if (s("iptables-sync-period") !== undefined) {
    c.syncPeriodMs = durationFlag("--iptables-sync-period", s("iptables-sync-period")!, 1);
  }
  if (s("iptables-min-sync-period") !== undefined) {
    c.minSyncPeriodMs = durationFlag("--iptables-min-sync-period", s("iptables-min-sync-period")!, 0);
  }
  if (s("config-sync-period") !== undefined) {
    c.configSyncPeriodMs = durationFlag("--config-sync-period", s("config-sync-period")!, 0);
  }
  if (s("healthz-bind-address") !== undefined) {
    c.healthzBindAddress = parseBind("--healthz-bind-address", s("healthz-bind-address")!);
  }
  if (s("metrics-bind-address") !== undefined) {
    c.metricsBindAddress = parseBind("--metrics-bind-address", s("metrics-bind-address")!);
  }
  if (s("tcp-idle-timeout") !== undefined) {
    c.tcpIdleTimeoutMs = durationFlag("--tcp-idle-timeout", s("tcp-idle-timeout")!, 0);
  }
  if (s("tcp-write-timeout") !== undefined) {
    c.tcpWriteTimeoutMs = durationFlag("--tcp-write-timeout", s("tcp-write-timeout")!, 0);
  }
  if (s("userspace-tcp-workers") !== undefined) {
    c.userspaceTcpWorkers = intFlag(
      "--userspace-tcp-workers",
      s("userspace-tcp-workers")!,
      0,
      MAX_TCP_WORKERS,
    );
  }
  if (s("udp-timeout") !== undefined) {
    c.udpIdleTimeoutMs = durationFlag("--udp-timeout", s("udp-timeout")!, 1);
  }
  const ipvs = c.ipvs;
  if (s("ipvs-scheduler") !== undefined) {
    ipvs.scheduler = parseScheduler("--ipvs-scheduler", s("ipvs-scheduler")!);
  }
  if (s("ipvs-exclude-cidrs") !== undefined) {
    ipvs.excludeCIDRs = parseCIDRs("--ipvs-exclude-cidrs", s("ipvs-exclude-cidrs")!);
  }
  if (v["ipvs-strict-arp"] !== undefined) ipvs.strictARP = v["ipvs-strict-arp"] as boolean;
  for (
    const [flag, key] of [
      ["ipvs-tcp-timeout", "tcpTimeoutMs"],
      ["ipvs-tcpfin-timeout", "tcpFinTimeoutMs"],
      ["ipvs-udp-timeout", "udpTimeoutMs"],
      ["ipvs-min-sync-period", "minSyncPeriodMs"],
    ] as const
  ) {
    if (s(flag) !== undefined) ipvs[key] = durationFlag(`--${flag}`, s(flag)!, 0);
  }
  if (s("ipvs-sync-period") !== undefined) {
    ipvs.syncPeriodMs = durationFlag("--ipvs-sync-period", s("ipvs-sync-period")!, 1);
  }
  if (s("proxy-port-range") !== undefined) {
    const r = parsePortRange(s("proxy-port-range")!);
    if (r === undefined) {
      throw new UsageError(
        `--proxy-port-range: invalid value ${JSON.stringify(s("proxy-port-range"))} (MIN-MAX or MIN+N)`,
      );
    }
    c.portRange = r;
  }
}

/** Reads the `trace` flags. @throws {UsageError} naming the flag. */
function parseTrace(v: Record<string, string | boolean | undefined>): TraceQuery {
  const s = (k: string) => v[k] as string | undefined;
  const dst = s("dst");
  if (dst === undefined) throw new UsageError("--dst: trace needs the destination address");
  parseIP("--dst", dst);
  const dport = s("dport");
  if (dport === undefined) throw new UsageError("--dport: trace needs the destination port");
  const port = intFlag("--dport", dport, 1, 65535);
  const proto = s("proto") ?? "tcp";
  if (proto !== "tcp" && proto !== "udp" && proto !== "sctp") {
    throw new UsageError(`--proto: invalid value ${JSON.stringify(proto)} (tcp, udp or sctp)`);
  }
  const from = s("from") ?? (s("src") === undefined ? "node" : "pod");
  if (from !== "pod" && from !== "node" && from !== "external") {
    throw new UsageError(`--from: invalid value ${JSON.stringify(from)} (pod, node or external)`);
  }
  const src = s("src");
  if (src !== undefined) parseIP("--src", src);
  else if (from !== "node") throw new UsageError(`--src: trace --from=${from} needs the source address`);
  const output = s("output") ?? "text";
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output: invalid value ${JSON.stringify(output)} (text or json)`);
  }
  const nodeIPs = s("node-ip") === undefined
    ? []
    : s("node-ip")!.split(",").map((ip) => parseIP("--node-ip", ip.trim()));
  return { src, dst, port, protocol: proto, from, rulesFile: s("rules"), output, nodeIPs };
}
