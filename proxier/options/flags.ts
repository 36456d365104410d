/**
 * Command line and KubeProxyConfiguration parsing into one {@linkcode ProxyConfig}.
 * Flag names, defaults and meanings follow upstream kube-proxy.
 * @module
 */
import { parseArgs } from "node:util";
import { loadYaml } from "@kubernetes/client-node";
import { parseDuration } from "./duration.ts";
import { cidrFamily, ipFamily } from "../net.ts";
import { parsePortRange, type PortRange } from "../userspace/port_range.ts";

/** The proxy modes; only some are built (see {@linkcode BUILT_MODES}). */
export type ProxyMode = "iptables" | "ipvs" | "userspace";

/** Modes this build can run. */
export const BUILT_MODES: ReadonlySet<ProxyMode> = new Set(["iptables", "userspace"]);

/** Where objects come from. */
export type SourceSpec = { kind: "kubernetes" } | { kind: "file"; path: string };

/** A `host:port` to listen on; undefined disables the server. */
export interface BindAddress {
  readonly hostname: string;
  readonly port: number;
}

/** The whole configuration of one run. */
export interface ProxyConfig {
  mode: ProxyMode;
  kubeconfig: string;
  master: string;
  hostnameOverride: string;
  bindAddress: string;
  clusterCIDRs: string[];
  nodePortAddresses: string[];
  masqueradeAll: boolean;
  masqueradeBit: number;
  localhostNodePorts: boolean;
  /** Userspace mode: program REDIRECT portals for cluster/external IPs (ours, default true). */
  userspacePortals: boolean;
  detectLocalMode: "ClusterCIDR" | "NodeCIDR";
  syncPeriodMs: number;
  minSyncPeriodMs: number;
  configSyncPeriodMs: number;
  healthzBindAddress?: BindAddress;
  metricsBindAddress?: BindAddress;
  udpIdleTimeoutMs: number;
  portRange: PortRange;
  verbosity: number;
  loggingFormat: "text" | "json";
  source: SourceSpec;
}

/** What the command line asks for. */
export interface ParsedCommand {
  readonly command: "run" | "render" | "cleanup" | "version" | "help";
  readonly config: ProxyConfig;
  /** Non-fatal remarks to log once logging is set up (e.g. flags ignored because of --config). */
  readonly warnings: string[];
  /** Path given to --config, if any (its content is already merged into `config`). */
  readonly configFile?: string;
}

/** A bad flag or config value; main prints the message and exits 2. */
export class UsageError extends Error {
  /** @param message names the flag (or config field) and the value. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** Returns the defaults upstream kube-proxy uses. */
export function defaultConfig(): ProxyConfig {
  return {
    mode: "iptables",
    kubeconfig: "",
    master: "",
    hostnameOverride: "",
    bindAddress: "0.0.0.0",
    clusterCIDRs: [],
    nodePortAddresses: [],
    masqueradeAll: false,
    masqueradeBit: 14,
    localhostNodePorts: true,
    userspacePortals: true,
    detectLocalMode: "ClusterCIDR",
    syncPeriodMs: 30_000,
    minSyncPeriodMs: 1_000,
    configSyncPeriodMs: 15 * 60_000,
    healthzBindAddress: { hostname: "0.0.0.0", port: 10256 },
    metricsBindAddress: { hostname: "127.0.0.1", port: 10249 },
    udpIdleTimeoutMs: 250,
    portRange: { min: 0, max: 0 },
    verbosity: 0,
    loggingFormat: "text",
    source: { kind: "kubernetes" },
  };
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
  "config-sync-period",
  "healthz-bind-address",
  "metrics-bind-address",
  "udp-timeout",
  "proxy-port-range",
  "detect-local-mode",
  "config",
  "v",
  "logging-format",
  "source",
] as const;
const BOOL_FLAGS = [
  "masquerade-all",
  "iptables-localhost-nodeports",
  "userspace-portals",
  "cleanup",
  "version",
  "help",
] as const;

/** Usage text for `--help`. */
export const USAGE = `Usage: kube-proxy-deno [render] [flags]

Makes Kubernetes Services reachable on this node (a drop-in kube-proxy).

Commands:
  (none)    run the proxy
  render    print the iptables-restore input a full sync would apply, touching nothing

Flags (upstream kube-proxy names and defaults):
  --proxy-mode=iptables|ipvs|userspace   datapath (default iptables)
  --source=kubernetes|file:PATH          where objects come from (default kubernetes)
  --kubeconfig=PATH  --master=URL        API server access (default: KUBECONFIG, ~/.kube/config, in-cluster)
  --hostname-override=NAME               this node's name (default: the hostname)
  --bind-address=IP                      userspace listen address (default 0.0.0.0)
  --cluster-cidr=CIDR[,CIDR]             pod CIDRs, to tell local traffic from external
  --detect-local-mode=ClusterCIDR|NodeCIDR
  --nodeport-addresses=CIDR[,CIDR]       addresses NodePorts answer on (default all)
  --masquerade-all                       SNAT all traffic to service IPs
  --iptables-masquerade-bit=14           fwmark bit for masquerading (0-31)
  --iptables-localhost-nodeports=true    allow NodePorts on 127.0.0.1
  --iptables-sync-period=30s             maximum interval between full syncs
  --iptables-min-sync-period=1s          minimum interval between syncs
  --config-sync-period=15m               informer resync period
  --healthz-bind-address=0.0.0.0:10256   health server ("" disables)
  --metrics-bind-address=127.0.0.1:10249 metrics server ("" disables)
  --userspace-portals=true               userspace: REDIRECT cluster/external IPs (false: NodePorts only)
  --udp-timeout=250ms                    userspace UDP session idle timeout
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
    throw new UsageError((e as Error).message.replace(/\. To specify a positional.*$/s, ""));
  }
  const v = { ...parsed.values, ...bools } as Record<string, string | boolean | undefined>;
  const positionals = parsed.positionals;
  if (positionals.length > 1 || (positionals.length === 1 && positionals[0] !== "render")) {
    throw new UsageError(`unknown command ${JSON.stringify(positionals.join(" "))} (only "render")`);
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
      ].includes(k)
    );
    if (others.length > 0) {
      warnings.push(`--config is set: ignoring flags ${others.map((k) => `--${k}`).join(", ")}`);
    }
    let text: string;
    try {
      text = readFile(configFile);
    } catch (e) {
      throw new UsageError(`--config: cannot read ${JSON.stringify(configFile)}: ${(e as Error).message}`);
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
    : "run";
  if (!BUILT_MODES.has(config.mode) && (command === "run" || command === "render")) {
    throw new UsageError(
      `--proxy-mode: mode ${JSON.stringify(config.mode)} is not built yet (built: ${
        [...BUILT_MODES].join(", ")
      })`,
    );
  }
  return { command, config, warnings, configFile };
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
    c.nodePortAddresses = parseCIDRs("--nodeport-addresses", s("nodeport-addresses")!);
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
  if (s("udp-timeout") !== undefined) {
    c.udpIdleTimeoutMs = durationFlag("--udp-timeout", s("udp-timeout")!, 1);
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

/** KubeProxyConfiguration fields we map, with the path used in messages. */
type Obj = Record<string, unknown>;

/**
 * Applies a `kubeproxy.config.k8s.io/v1alpha1` KubeProxyConfiguration. Unknown fields are errors,
 * as upstream's strict decoding.
 */
export function applyConfigFile(c: ProxyConfig, text: string, path: string): void {
  let doc: unknown;
  try {
    doc = loadYaml(text);
  } catch (e) {
    const mark = (e as { mark?: { line: number } }).mark;
    throw new UsageError(
      `--config: ${path}${mark ? `:${mark.line + 1}` : ""}: ${(e as Error).message.split("\n")[0]}`,
    );
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new UsageError(`--config: ${path}: not a mapping`);
  }
  const d = doc as Obj;
  if (d.kind !== "KubeProxyConfiguration" || d.apiVersion !== "kubeproxy.config.k8s.io/v1alpha1") {
    throw new UsageError(
      `--config: ${path}: want kind KubeProxyConfiguration, apiVersion kubeproxy.config.k8s.io/v1alpha1`,
    );
  }
  const where = (f: string) => `--config: ${path}: ${f}`;
  const str = (f: string, x: unknown): string => {
    if (typeof x !== "string") throw new UsageError(`${where(f)}: want a string, got ${JSON.stringify(x)}`);
    return x;
  };
  const dur = (f: string, x: unknown, min: number) => durationFlag(where(f), str(f, x), min);
  const bool = (f: string, x: unknown): boolean => {
    if (typeof x !== "boolean") {
      throw new UsageError(`${where(f)}: want true or false, got ${JSON.stringify(x)}`);
    }
    return x;
  };
  const known = (o: Obj, prefix: string, fields: string[]) => {
    for (const k of Object.keys(o)) {
      if (!fields.includes(k)) throw new UsageError(`${where(prefix + k)}: unknown field`);
    }
  };
  known(d, "", [
    "apiVersion",
    "kind",
    "bindAddress",
    "clusterCIDR",
    "hostnameOverride",
    "healthzBindAddress",
    "metricsBindAddress",
    "mode",
    "clientConnection",
    "iptables",
    "ipvs",
    "nftables",
    "conntrack",
    "configSyncPeriod",
    "nodePortAddresses",
    "udpIdleTimeout",
    "portRange",
    "detectLocalMode",
    "detectLocal",
    "logging",
    "featureGates",
    "enableProfiling",
    "showHiddenMetricsForVersion",
    "bindAddressHardFail",
    "oomScoreAdj",
    "winkernel",
    "syncPeriod",
    "minSyncPeriod",
  ]);
  if (d.mode !== undefined && d.mode !== "") c.mode = parseMode(where("mode"), str("mode", d.mode));
  if (d.bindAddress !== undefined) {
    c.bindAddress = parseIP(where("bindAddress"), str("bindAddress", d.bindAddress));
  }
  if (d.clusterCIDR !== undefined && d.clusterCIDR !== "") {
    c.clusterCIDRs = parseCIDRs(where("clusterCIDR"), str("clusterCIDR", d.clusterCIDR));
  }
  if (d.hostnameOverride !== undefined && d.hostnameOverride !== "") {
    c.hostnameOverride = parseNodeName(
      where("hostnameOverride"),
      str("hostnameOverride", d.hostnameOverride),
    );
  }
  if (d.healthzBindAddress !== undefined) {
    c.healthzBindAddress = parseBind(
      where("healthzBindAddress"),
      str("healthzBindAddress", d.healthzBindAddress),
    );
  }
  if (d.metricsBindAddress !== undefined) {
    c.metricsBindAddress = parseBind(
      where("metricsBindAddress"),
      str("metricsBindAddress", d.metricsBindAddress),
    );
  }
  if (d.configSyncPeriod !== undefined) c.configSyncPeriodMs = dur("configSyncPeriod", d.configSyncPeriod, 0);
  if (d.udpIdleTimeout !== undefined) c.udpIdleTimeoutMs = dur("udpIdleTimeout", d.udpIdleTimeout, 1);
  if (d.detectLocalMode !== undefined && d.detectLocalMode !== "") {
    c.detectLocalMode = parseLocalMode(where("detectLocalMode"), str("detectLocalMode", d.detectLocalMode));
  }
  if (d.portRange !== undefined && d.portRange !== "") {
    const r = parsePortRange(str("portRange", d.portRange));
    if (r === undefined) {
      throw new UsageError(`${where("portRange")}: invalid value ${JSON.stringify(d.portRange)}`);
    }
    c.portRange = r;
  }
  if (d.nodePortAddresses !== undefined && d.nodePortAddresses !== null) {
    if (!Array.isArray(d.nodePortAddresses)) {
      throw new UsageError(`${where("nodePortAddresses")}: want a list`);
    }
    c.nodePortAddresses = parseCIDRs(
      where("nodePortAddresses"),
      d.nodePortAddresses.map((x) => str("nodePortAddresses[]", x)).join(","),
    );
  }
  if (d.syncPeriod !== undefined) c.syncPeriodMs = dur("syncPeriod", d.syncPeriod, 1);
  if (d.minSyncPeriod !== undefined) c.minSyncPeriodMs = dur("minSyncPeriod", d.minSyncPeriod, 0);
  const sub = (name: string, fields: string[]): Obj | undefined => {
    const o = d[name];
    if (o === undefined || o === null) return undefined;
    if (typeof o !== "object" || Array.isArray(o)) throw new UsageError(`${where(name)}: want a mapping`);
    known(o as Obj, `${name}.`, fields);
    return o as Obj;
  };
  const cc = sub("clientConnection", ["kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"]);
  if (cc?.kubeconfig !== undefined) c.kubeconfig = str("clientConnection.kubeconfig", cc.kubeconfig);
  const ipt = sub("iptables", [
    "masqueradeAll",
    "masqueradeBit",
    "syncPeriod",
    "minSyncPeriod",
    "localhostNodePorts",
  ]);
  if (ipt !== undefined) {
    if (ipt.masqueradeAll !== undefined) c.masqueradeAll = bool("iptables.masqueradeAll", ipt.masqueradeAll);
    if (ipt.localhostNodePorts !== undefined) {
      c.localhostNodePorts = bool("iptables.localhostNodePorts", ipt.localhostNodePorts);
    }
    if (ipt.masqueradeBit !== undefined && ipt.masqueradeBit !== null) {
      c.masqueradeBit = intFlag(where("iptables.masqueradeBit"), String(ipt.masqueradeBit), 0, 31);
    }
    if (ipt.syncPeriod !== undefined) c.syncPeriodMs = dur("iptables.syncPeriod", ipt.syncPeriod, 1);
    if (ipt.minSyncPeriod !== undefined) {
      c.minSyncPeriodMs = dur("iptables.minSyncPeriod", ipt.minSyncPeriod, 0);
    }
  }
  sub("ipvs", [
    "scheduler",
    "excludeCIDRs",
    "strictARP",
    "syncPeriod",
    "minSyncPeriod",
    "tcpTimeout",
    "tcpFinTimeout",
    "udpTimeout",
  ]);
  const lg = sub("logging", ["format", "verbosity", "flushFrequency", "options", "vmodule"]);
  if (lg?.format !== undefined) {
    if (lg.format !== "text" && lg.format !== "json") {
      throw new UsageError(`${where("logging.format")}: invalid value ${JSON.stringify(lg.format)}`);
    }
    c.loggingFormat = lg.format;
  }
  if (lg?.verbosity !== undefined) {
    c.verbosity = intFlag(where("logging.verbosity"), String(lg.verbosity), 0, 10);
  }
}

function parseMode(flag: string, s: string): ProxyMode {
  if (s === "") return "iptables";
  if (s === "iptables" || s === "ipvs" || s === "userspace") return s;
  throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (iptables, ipvs or userspace)`);
}

function parseSource(s: string): SourceSpec {
  if (s === "kubernetes") return { kind: "kubernetes" };
  if (s.startsWith("file:") && s.length > 5) return { kind: "file", path: s.slice(5) };
  throw new UsageError(`--source: invalid value ${JSON.stringify(s)} (kubernetes or file:PATH)`);
}

function parseURL(flag: string, s: string): string {
  try {
    const u = new URL(s);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("not http(s)");
  } catch {
    throw new UsageError(`${flag}: invalid URL ${JSON.stringify(s)}`);
  }
  return s;
}

function parseNodeName(flag: string, s: string): string {
  const n = s.trim().toLowerCase();
  if (n.length === 0 || n.length > 253 || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(n)) {
    throw new UsageError(`${flag}: invalid node name ${JSON.stringify(s)}`);
  }
  return n;
}

function parseIP(flag: string, s: string): string {
  if (ipFamily(s) === undefined) throw new UsageError(`${flag}: invalid IP address ${JSON.stringify(s)}`);
  return s;
}

function parseCIDRs(flag: string, s: string): string[] {
  if (s.trim() === "") return [];
  return s.split(",").map((x) => {
    const t = x.trim();
    if (cidrFamily(t) === undefined) throw new UsageError(`${flag}: invalid CIDR ${JSON.stringify(t)}`);
    return t;
  });
}

function parseLocalMode(flag: string, s: string): "ClusterCIDR" | "NodeCIDR" {
  if (s === "ClusterCIDR" || s === "NodeCIDR") return s;
  throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (ClusterCIDR or NodeCIDR)`);
}

function parseBind(flag: string, s: string): BindAddress | undefined {
  if (s === "") return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(s);
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (m === null || ipFamily(host) === undefined || port > 65535) {
    throw new UsageError(`${flag}: invalid address ${JSON.stringify(s)} (want IP:PORT)`);
  }
  return { hostname: host!, port };
}

function intFlag(flag: string, s: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(s) || Number(s) < min || Number(s) > max) {
    throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (an integer from ${min} to ${max})`);
  }
  return Number(s);
}

function durationFlag(flag: string, s: string, minMs: number): number {
  const ms = parseDuration(s);
  if (ms === undefined) {
    throw new UsageError(`${flag}: invalid duration ${JSON.stringify(s)} (e.g. 1s, 500ms, 1m30s)`);
  }
  if (ms < minMs) throw new UsageError(`${flag}: duration ${JSON.stringify(s)} must be positive`);
  return ms;
}
