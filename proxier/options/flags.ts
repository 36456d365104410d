/**
 * The command line: every flag of upstream kube-proxy 1.36 (Linux) with its name, meaning, default
 * and validation, this program's own flags, and how they meet a `--config` file, as upstream's
 * `cmd/kube-proxy/app/options.go`: without `--config` the flags fill in a defaulted
 * KubeProxyConfiguration; with it the file does, and only the logging flags, `--hostname-override`,
 * `--master` and the process flags still apply (the others are named in one warning).
 * @module
 */
import { UsageError } from "../errors.ts";
import { ipFamily } from "../net.ts";
import { MAX_TCP_WORKERS, type ProxyConfig } from "./config.ts";
import { decodeConfigFile } from "./config_file.ts";
import { parseDuration } from "./duration.ts";
import {
  appendPortIfNeeded,
  defaultKubeProxyConfiguration,
  defaultOwnFlags,
  HEALTHZ_PORT,
  isZeroQuantity,
  type KubeProxyConfiguration,
  METRICS_PORT,
  modeSection,
  type OwnFlags,
  platformDefaults,
  QUANTITY,
  setDefaults,
  splitHostPort,
  toProxyConfig,
} from "./kube_proxy_configuration.ts";
import { type FlagShape, type FlagUse, parseBool, scanArgs } from "./pflag.ts";
import { type FieldError, validate } from "./validation.ts";
import { parseBackend, parseIP, parseNodeName, parsePortRange, parseSource, parseURL } from "./values.ts";

/** What the command line asks for. */
export interface ParsedCommand {
  readonly command:
    | "run"
    | "render"
    | "trace"
    | "cleanup"
    | "init-only"
    | "write-config"
    | "version"
    | "help";
  /** Set for `trace`. */
  readonly trace?: TraceQuery;
  /** For `help`: the program's usage, or `trace --help`'s. */
  readonly usage: string;
  /** `render --node-ip`: the node's addresses to render with (else the Node object's). */
  readonly renderNodeIPs?: readonly string[];
  /** What the program runs with. */
  readonly config: ProxyConfig;
  /** The same settings in upstream's format (`--write-config-to` writes it). */
  readonly kubeProxyConfiguration: KubeProxyConfiguration;
  /** `--write-config-to`'s path. */
  readonly writeConfigTo?: string;
  /** Non-fatal remarks to log once logging is set up (flags ignored because of --config, unknown fields). */
  readonly warnings: string[];
  /** Settings given that do nothing in this program, each with why; named once at start. */
  readonly notApplying: string[];
  /** Path given to --config, if any (its content is already merged into `config`). */
  readonly configFile?: string;
  /** Every flag (but trace's) with its value as given, else its default: what `/flagz` lists. */
  readonly flagValues: ReadonlyArray<readonly [name: string, value: string]>;
}

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
  /** `--proxy-mode` (or the config file's mode) was given; else the mode is told from the rules. */
  readonly modeChosen: boolean;
  /** Set when `src` was not given but assumed: why that address (printed with the packet). */
  readonly srcAssumed?: string;
}

/** The state of parsing: the configuration the flags fill in, and what they leave for later. */
interface FlagContext {
  readonly v: KubeProxyConfiguration;
  readonly own: OwnFlags;
  /** Flags whose meaning depends on others (`--*-sync-period` on the mode, in ms), applied last. */
  readonly late: Map<string, number>;
  healthzPort: number;
  metricsPort: number;
  readonly notes: string[];
}

/** Who defines a flag. */
export type FlagOrigin = "upstream" | "ours" | "trace";

/** One flag: its shape, help, and what it does. */
export interface FlagDef extends FlagShape {
  readonly origin: FlagOrigin;
  /** The value type and default as `--help` shows them (`duration`, `30s`). */
  readonly type: string;
  readonly default: string;
  readonly help: string;
  /**
   * true: the flag applies beside `--config` (logging, process and this program's own source
   * flags); otherwise the file's value wins, as upstream.
   */
  readonly withConfig?: boolean;
  /** Undefined: it takes effect. Otherwise why it has no effect in this program. */
  readonly notApplying?: string;
  /** The file field it sets, so a validation error names the flag. */
  readonly field?: string;
  readonly apply?: (c: FlagContext, value: string) => void;
}

const int = (flag: string, s: string, min = -(2 ** 31), max = 2 ** 31 - 1): number => {
  if (!/^[+-]?\d+$/.test(s) || Number(s) < min || Number(s) > max) {
    throw new UsageError(`--${flag}: invalid value ${JSON.stringify(s)} (an integer from ${min} to ${max})`);
  }
  return Number(s);
};
const dur = (flag: string, s: string): number => {
  const ms = parseDuration(s);
  if (ms === undefined) {
    throw new UsageError(`--${flag}: invalid duration ${JSON.stringify(s)} (e.g. 1s, 500ms, 1m30s)`);
  }
  return ms;
};
const float = (flag: string, s: string): number => {
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(s)) {
    throw new UsageError(`--${flag}: invalid value ${JSON.stringify(s)} (a number)`);
  }
  return Number(s);
};
const list = (s: string): string[] => s.split(",").map((x) => x.trim()).filter((x) => x !== "");
const quantity = (flag: string, s: string): string => {
  if (!QUANTITY.test(s)) {
    throw new UsageError(`--${flag}: invalid quantity ${JSON.stringify(s)} (e.g. 0, 10Mi)`);
  }
  return s;
};

/** IPVar / IPPortVar: an IP, or (for addresses) an IP with a port; "" is allowed. */
const ipPort = (flag: string, s: string): string => {
  if (s === "" || ipFamily(s) !== undefined) return s;
  const hp = splitHostPort(s);
  if (hp === undefined || ipFamily(hp.host) === undefined || !/^\d{1,5}$/.test(hp.port)) {
    throw new UsageError(`--${flag}: invalid address ${JSON.stringify(s)} (want IP or IP:PORT)`);
  }
  return s;
};

/** `pattern=N,...` (`--vmodule`). */
function vmodule(s: string): Array<{ filePattern: string; verbosity: number }> {
  return list(s).map((e) => {
    const m = /^([^=]+)=(\d+)$/.exec(e);
    if (m === null) throw new UsageError(`--vmodule: invalid entry ${JSON.stringify(e)} (want pattern=N)`);
    return { filePattern: m[1], verbosity: Number(m[2]) };
  });
}

/** Every flag, upstream's first (in `kube-proxy --help` order), then ours, then trace's. */
export const FLAGS: readonly FlagDef[] = [
  // Upstream kube-proxy 1.36.
  {
    name: "bind-address",
    origin: "upstream",
    type: "ip",
    default: "0.0.0.0",
    field: "bindAddress",
    help: "the node's primary IP override; the userspace mode listens on it",
    apply: (c, s) => c.v.bindAddress = parseIP("--bind-address", s),
  },
  {
    name: "bind-address-hard-fail",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    help: "exit when the health or metrics server cannot bind (false: retry every 5s)",
    apply: (c, s) => c.v.bindAddressHardFail = parseBool("--bind-address-hard-fail", s),
  },
  {
    name: "boot-id-file",
    origin: "upstream",
    type: "string",
    default: "/proc/sys/kernel/random/boot_id",
    withConfig: true,
    notApplying: "cadvisor's machine identity, which upstream links in and this program never reads",
    help: "files to read the boot ID from (cadvisor's)",
  },
  {
    name: "cleanup",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    withConfig: true,
    help: "remove every rule kube-proxy(-deno) created in every mode, then exit",
  },
  {
    name: "cluster-cidr",
    origin: "upstream",
    type: "string",
    default: "",
    field: "clusterCIDR",
    help:
      "pod CIDRs (a dual-stack pair allowed); with --detect-local-mode=ClusterCIDR, traffic from them is local",
    apply: (c, s) => c.v.clusterCIDR = s,
  },
  {
    name: "config",
    origin: "upstream",
    type: "string",
    default: "",
    withConfig: true,
    help: "a KubeProxyConfiguration file (v1alpha1); most other flags are then ignored, as upstream",
  },
  {
    name: "config-sync-period",
    origin: "upstream",
    type: "duration",
    default: "15m0s",
    field: "configSyncPeriod",
    help: "how often the informers resync from their cache; must be greater than 0",
    apply: (c, s) => c.v.configSyncPeriod = dur("config-sync-period", s),
  },
  {
    name: "conntrack-max-per-core",
    origin: "upstream",
    type: "int32",
    default: "32768",
    field: "conntrack.maxPerCore",
    help: "nf_conntrack_max per CPU (0 leaves the limit and ignores --conntrack-min)",
    apply: (c, s) => c.v.conntrack.maxPerCore = int("conntrack-max-per-core", s),
  },
  {
    name: "conntrack-min",
    origin: "upstream",
    type: "int32",
    default: "131072",
    field: "conntrack.min",
    help: "nf_conntrack_max at least this, whatever --conntrack-max-per-core gives",
    apply: (c, s) => c.v.conntrack.min = int("conntrack-min", s),
  },
  {
    name: "conntrack-tcp-be-liberal",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    help:
      "nf_conntrack_tcp_be_liberal=1 (out-of-window packets are not INVALID; iptables mode then drops no INVALID packet)",
    apply: (c, s) => c.v.conntrack.tcpBeLiberal = parseBool("--conntrack-tcp-be-liberal", s),
  },
  {
    name: "conntrack-tcp-timeout-close-wait",
    origin: "upstream",
    type: "duration",
    default: "1h0m0s",
    field: "conntrack.tcpCloseWaitTimeout",
    help: "nf_conntrack_tcp_timeout_close_wait (0 leaves it)",
    apply: (c, s) => c.v.conntrack.tcpCloseWaitTimeout = dur("conntrack-tcp-timeout-close-wait", s),
  },
  {
    name: "conntrack-tcp-timeout-established",
    origin: "upstream",
    type: "duration",
    default: "24h0m0s",
    field: "conntrack.tcpEstablishedTimeout",
    help: "nf_conntrack_tcp_timeout_established (0 leaves it)",
    apply: (c, s) => c.v.conntrack.tcpEstablishedTimeout = dur("conntrack-tcp-timeout-established", s),
  },
  {
    name: "conntrack-udp-timeout",
    origin: "upstream",
    type: "duration",
    default: "0s",
    field: "conntrack.udpTimeout",
    help: "nf_conntrack_udp_timeout, for UNREPLIED UDP flows (0 leaves it)",
    apply: (c, s) => c.v.conntrack.udpTimeout = dur("conntrack-udp-timeout", s),
  },
  {
    name: "conntrack-udp-timeout-stream",
    origin: "upstream",
    type: "duration",
    default: "0s",
    field: "conntrack.udpStreamTimeout",
    help: "nf_conntrack_udp_timeout_stream, for ASSURED UDP flows (0 leaves it)",
    apply: (c, s) => c.v.conntrack.udpStreamTimeout = dur("conntrack-udp-timeout-stream", s),
  },
  {
    name: "detect-local-mode",
    origin: "upstream",
    type: "LocalMode",
    default: "ClusterCIDR",
    field: "detectLocalMode",
    help: "how local pod traffic is told: ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix",
    apply: (c, s) => c.v.detectLocalMode = s,
  },
  {
    name: "feature-gates",
    origin: "upstream",
    type: "mapStringBool",
    default: "",
    field: "featureGates",
    help: "key=value pairs of upstream feature gates (accepted; this program has none)",
    apply: (c, s) => {
      for (const kv of list(s)) {
        const m = /^([^=]+)=(.*)$/.exec(kv);
        if (m === null) throw new UsageError(`--feature-gates: missing bool value for ${kv}`);
        c.v.featureGates[m[1].trim()] = parseBool(`--feature-gates: ${m[1].trim()}`, m[2].trim());
      }
    },
  },
  {
    name: "healthz-bind-address",
    origin: "upstream",
    type: "ipport",
    default: "0.0.0.0:10256",
    field: "healthzBindAddress",
    help: "/healthz and /livez: IP or IP:PORT (an IP alone takes port 10256); empty disables",
    apply: (c, s) => c.v.healthzBindAddress = ipPort("healthz-bind-address", s),
  },
  {
    name: "healthz-port",
    origin: "upstream",
    type: "int32",
    default: "10256",
    help: "deprecated: the port of --healthz-bind-address when it is an IP alone; 0 disables",
    apply: (c, s) => {
      c.healthzPort = int("healthz-port", s, 0, 65535);
      c.notes.push("Flag --healthz-port has been deprecated; use --healthz-bind-address");
    },
  },
  {
    name: "help",
    shorthand: "h",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    withConfig: true,
    help: "print this help",
  },
  {
    name: "hostname-override",
    origin: "upstream",
    type: "string",
    default: "",
    withConfig: true,
    help: "this node's name (default: the hostname); applies beside --config",
  },
  {
    name: "init-only",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    withConfig: true,
    help: "do the privileged set-up (conntrack and the mode's sysctls), then exit 0 (for an init container)",
  },
  {
    name: "iptables-localhost-nodeports",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "true",
    help: "false: no NodePorts on 127.0.0.1 (iptables mode, IPv4)",
    apply: (c, s) => c.v.iptables.localhostNodePorts = parseBool("--iptables-localhost-nodeports", s),
  },
  {
    name: "iptables-masquerade-bit",
    origin: "upstream",
    type: "int32",
    default: "14",
    field: "iptables.masqueradeBit",
    help: "the fwmark bit that marks packets to masquerade (iptables and ipvs modes), 0-31",
    apply: (c, s) => c.v.iptables.masqueradeBit = int("iptables-masquerade-bit", s),
  },
  {
    name: "iptables-min-sync-period",
    origin: "upstream",
    type: "duration",
    default: "1s",
    help: "the shortest time between syncs (every mode but ipvs); 0: every change syncs at once",
    apply: (c, s) => c.late.set("iptables-min-sync-period", dur("iptables-min-sync-period", s)),
  },
  {
    name: "iptables-sync-period",
    origin: "upstream",
    type: "duration",
    default: "30s",
    help: "how often to resync (partial; a full one hourly) in every mode but ipvs; must be greater than 0",
    apply: (c, s) => c.late.set("iptables-sync-period", dur("iptables-sync-period", s)),
  },
  {
    name: "ipvs-exclude-cidrs",
    origin: "upstream",
    type: "strings",
    default: "",
    field: "ipvs.excludeCIDRs",
    help: "ipvs: virtual servers in these CIDRs are never touched",
    apply: (c, s) => c.v.ipvs.excludeCIDRs = [...c.v.ipvs.excludeCIDRs ?? [], ...list(s)],
  },
  {
    name: "ipvs-min-sync-period",
    origin: "upstream",
    type: "duration",
    default: "0s",
    help: "ipvs mode: the shortest time between syncs",
    apply: (c, s) => c.late.set("ipvs-min-sync-period", dur("ipvs-min-sync-period", s)),
  },
  {
    name: "ipvs-scheduler",
    origin: "upstream",
    type: "string",
    default: "",
    field: "ipvs.scheduler",
    help:
      "ipvs: rr (empty), wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh; a Service's kube-router annotation wins",
    apply: (c, s) => c.v.ipvs.scheduler = s,
  },
  {
    name: "ipvs-strict-arp",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    help: "ipvs: arp_ignore=1 and arp_announce=2",
    apply: (c, s) => c.v.ipvs.strictARP = parseBool("--ipvs-strict-arp", s),
  },
  {
    name: "ipvs-sync-period",
    origin: "upstream",
    type: "duration",
    default: "30s",
    help: "ipvs mode: how often to resync; must be greater than 0",
    apply: (c, s) => c.late.set("ipvs-sync-period", dur("ipvs-sync-period", s)),
  },
  {
    name: "ipvs-tcp-timeout",
    origin: "upstream",
    type: "duration",
    default: "0s",
    field: "ipvs.tcpTimeout",
    help: "ipvs: idle TCP connection timeout (0 leaves the kernel's)",
    apply: (c, s) => c.v.ipvs.tcpTimeout = dur("ipvs-tcp-timeout", s),
  },
  {
    name: "ipvs-tcpfin-timeout",
    origin: "upstream",
    type: "duration",
    default: "0s",
    field: "ipvs.tcpFinTimeout",
    help: "ipvs: TCP timeout after a FIN (0 leaves the kernel's)",
    apply: (c, s) => c.v.ipvs.tcpFinTimeout = dur("ipvs-tcpfin-timeout", s),
  },
  {
    name: "ipvs-udp-timeout",
    origin: "upstream",
    type: "duration",
    default: "0s",
    field: "ipvs.udpTimeout",
    help: "ipvs: UDP timeout (0 leaves the kernel's)",
    apply: (c, s) => c.v.ipvs.udpTimeout = dur("ipvs-udp-timeout", s),
  },
  {
    name: "kube-api-burst",
    origin: "upstream",
    type: "int32",
    default: "10",
    field: "clientConnection.burst",
    help: "API requests allowed in a burst",
    apply: (c, s) => c.v.clientConnection.burst = int("kube-api-burst", s),
  },
  {
    name: "kube-api-content-type",
    origin: "upstream",
    type: "string",
    default: "application/vnd.kubernetes.protobuf",
    help: "the encoding asked of the API server (this program always reads JSON; it says so at start)",
    apply: (c, s) => c.v.clientConnection.contentType = s,
  },
  {
    name: "kube-api-qps",
    origin: "upstream",
    type: "float32",
    default: "5",
    help: "API requests per second, sustained (negative: no limit)",
    apply: (c, s) => c.v.clientConnection.qps = float("kube-api-qps", s),
  },
  {
    name: "kubeconfig",
    origin: "upstream",
    type: "string",
    default: "",
    help: "a kubeconfig file (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)",
    apply: (c, s) => c.v.clientConnection.kubeconfig = s,
  },
  {
    name: "log-flush-frequency",
    origin: "upstream",
    type: "duration",
    default: "5s",
    withConfig: true,
    help: "longest time between log flushes (records are written at once here)",
    apply: (c, s) => c.v.logging.flushFrequency = dur("log-flush-frequency", s),
  },
  {
    name: "log-json-info-buffer-size",
    origin: "upstream",
    type: "quantity",
    default: "0",
    withConfig: true,
    help: "JSON format, split streams: bytes of info records buffered (records are written at once here)",
    apply: (c, s) => c.v.logging.options.json.infoBufferSize = quantity("log-json-info-buffer-size", s),
  },
  {
    name: "log-json-split-stream",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    withConfig: true,
    help: "JSON format: info records to stdout, errors to stderr",
    apply: (c, s) => c.v.logging.options.json.splitStream = parseBool("--log-json-split-stream", s),
  },
  {
    name: "log-text-info-buffer-size",
    origin: "upstream",
    type: "quantity",
    default: "0",
    withConfig: true,
    help: "text format, split streams: bytes of info records buffered (records are written at once here)",
    apply: (c, s) => c.v.logging.options.text.infoBufferSize = quantity("log-text-info-buffer-size", s),
  },
  {
    name: "log-text-split-stream",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    withConfig: true,
    help: "text format: info records to stdout, errors to stderr",
    apply: (c, s) => c.v.logging.options.text.splitStream = parseBool("--log-text-split-stream", s),
  },
  {
    name: "logging-format",
    origin: "upstream",
    type: "string",
    default: "text",
    withConfig: true,
    field: "logging.format",
    help: "text or json (one object per line, on stderr)",
    apply: (c, s) => c.v.logging.format = s,
  },
  {
    name: "machine-id-file",
    origin: "upstream",
    type: "string",
    default: "/etc/machine-id,/var/lib/dbus/machine-id",
    withConfig: true,
    notApplying: "cadvisor's machine identity, which upstream links in and this program never reads",
    help: "files to read the machine ID from (cadvisor's)",
  },
  {
    name: "masquerade-all",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    help: "SNAT all traffic sent to service IPs",
    apply: (c, s) => {
      c.v.iptables.masqueradeAll = c.v.nftables.masqueradeAll = parseBool("--masquerade-all", s);
    },
  },
  {
    name: "master",
    origin: "upstream",
    type: "string",
    default: "",
    withConfig: true,
    help: "the API server's URL (overrides the kubeconfig's); applies beside --config",
    apply: (c, s) => c.own.master = parseURL("--master", s),
  },
  {
    name: "metrics-bind-address",
    origin: "upstream",
    type: "ipport",
    default: "127.0.0.1:10249",
    field: "metricsBindAddress",
    help: "/metrics: IP or IP:PORT (an IP alone takes port 10249); empty disables",
    apply: (c, s) => c.v.metricsBindAddress = ipPort("metrics-bind-address", s),
  },
  {
    name: "metrics-port",
    origin: "upstream",
    type: "int32",
    default: "10249",
    help: "deprecated: the port of --metrics-bind-address when it is an IP alone; 0 disables",
    apply: (c, s) => {
      c.metricsPort = int("metrics-port", s, 0, 65535);
      c.notes.push("Flag --metrics-port has been deprecated; use --metrics-bind-address");
    },
  },
  {
    name: "nodeport-addresses",
    origin: "upstream",
    type: "strings",
    default: "",
    field: "nodePortAddresses",
    help:
      "CIDRs whose local addresses answer NodePorts, or primary (the Node's IPs); default all (nftables: primary)",
    apply: (c, s) => c.v.nodePortAddresses = [...c.v.nodePortAddresses ?? [], ...list(s)],
  },
  {
    name: "oom-score-adj",
    origin: "upstream",
    type: "int32",
    default: "-999",
    field: "oomScoreAdj",
    help: "this process's oom_score_adj, -1000 to 1000",
    apply: (c, s) => c.v.oomScoreAdj = int("oom-score-adj", s),
  },
  {
    name: "pod-bridge-interface",
    origin: "upstream",
    type: "string",
    default: "",
    field: "detectLocal.bridgeInterface",
    help: "with --detect-local-mode=BridgeInterface: traffic arriving on this bridge is local",
    apply: (c, s) => c.v.detectLocal.bridgeInterface = s,
  },
  {
    name: "pod-interface-name-prefix",
    origin: "upstream",
    type: "string",
    default: "",
    field: "detectLocal.interfaceNamePrefix",
    help: "with --detect-local-mode=InterfaceNamePrefix: traffic arriving on interfaces so named is local",
    apply: (c, s) => c.v.detectLocal.interfaceNamePrefix = s,
  },
  {
    name: "profiling",
    origin: "upstream",
    bool: true,
    type: "bool",
    default: "false",
    help: "serve /debug/pprof (no profiler here; named at start)",
    apply: (c, s) => c.v.enableProfiling = parseBool("--profiling", s),
  },
  {
    name: "proxy-mode",
    origin: "upstream",
    type: "ProxyMode",
    default: "iptables",
    field: "mode",
    help: "iptables, nftables, ipvs or userspace (ours)",
    apply: (c, s) => c.v.mode = s,
  },
  {
    name: "show-hidden-metrics-for-version",
    origin: "upstream",
    type: "string",
    default: "",
    field: "showHiddenMetricsForVersion",
    help: "the previous minor version whose hidden metrics to show (no metric is hidden here)",
    apply: (c, s) => c.v.showHiddenMetricsForVersion = s,
  },
  {
    name: "v",
    shorthand: "v",
    origin: "upstream",
    type: "Level",
    default: "0",
    withConfig: true,
    field: "logging.verbosity",
    help: "log verbosity (4 and above: debug records)",
    apply: (c, s) => c.v.logging.verbosity = int("v", s, 0),
  },
  {
    name: "version",
    origin: "upstream",
    type: "version",
    default: "false",
    noValue: "true",
    withConfig: true,
    help: "print the version and exit",
  },
  {
    name: "vmodule",
    origin: "upstream",
    type: "pattern=N,...",
    default: "",
    withConfig: true,
    field: "logging.vmodule",
    help: "per-file verbosity (text format; accepted, not applied: --v applies to every record here)",
    apply: (c, s) => c.v.logging.vmodule = [...c.v.logging.vmodule ?? [], ...vmodule(s)],
  },
  {
    name: "write-config-to",
    origin: "upstream",
    type: "string",
    default: "",
    withConfig: true,
    help: "write the effective configuration (upstream's format) to this file, then exit",
  },
  // Ours.
  {
    name: "source",
    origin: "ours",
    type: "string",
    default: "kubernetes",
    withConfig: true,
    help: "where objects come from: kubernetes, or file:PATH (YAML/JSON files, followed)",
    apply: (c, s) => c.own.source = parseSource(s),
  },
  {
    name: "iptables-backend",
    origin: "ours",
    type: "string",
    default: "auto",
    withConfig: true,
    help: "nft, legacy, or auto (kubelet's chains, else the backend with more rules; nft on an empty host)",
    apply: (c, s) => c.own.iptablesBackend = parseBackend("--iptables-backend", s),
  },
  {
    name: "kernel-tool-timeout",
    origin: "ours",
    type: "duration",
    default: "5m0s",
    withConfig: true,
    help:
      "kill a kernel tool (iptables-restore, nft, ipvsadm...) still running after this long plus 10 s per MiB of its input; the sync fails and is retried (0: never)",
    apply: (c, s) => c.own.kernelToolTimeoutMs = dur("kernel-tool-timeout", s),
  },
  {
    name: "userspace-portals",
    origin: "ours",
    bool: true,
    type: "bool",
    default: "true",
    help: "userspace: REDIRECT cluster and external IPs (false: NodePorts only)",
    apply: (c, s) => c.own.userspacePortals = parseBool("--userspace-portals", s),
  },
  {
    name: "udp-timeout",
    origin: "ours",
    type: "duration",
    default: "250ms",
    field: "udpIdleTimeout",
    help: "userspace: UDP session idle timeout (upstream's userspace mode had it)",
    apply: (c, s) => c.v.udpIdleTimeout = dur("udp-timeout", s),
  },
  {
    name: "tcp-idle-timeout",
    origin: "ours",
    type: "duration",
    default: "1h0m0s",
    field: "tcpIdleTimeout",
    help: "userspace: close a TCP connection idle this long (0: never)",
    apply: (c, s) => c.v.tcpIdleTimeout = dur("tcp-idle-timeout", s),
  },
  {
    name: "tcp-write-timeout",
    origin: "ours",
    type: "duration",
    default: "1m0s",
    field: "tcpWriteTimeout",
    help: "userspace: close a TCP connection whose peer stopped reading for this long (0: never)",
    apply: (c, s) => c.v.tcpWriteTimeout = dur("tcp-write-timeout", s),
  },
  {
    name: "userspace-tcp-workers",
    origin: "ours",
    type: "int",
    default: "2 per core, up to 8",
    field: "userspaceTcpWorkers",
    help:
      `userspace: threads serving TCP through SO_REUSEPORT (0: the main thread; at most ${MAX_TCP_WORKERS})`,
    apply: (c, s) => c.v.userspaceTcpWorkers = int("userspace-tcp-workers", s),
  },
  {
    name: "proxy-port-range",
    origin: "ours",
    type: "port-range",
    default: "",
    field: "portRange",
    help: "userspace portal ports, MIN-MAX or MIN+N (default: any free port)",
    apply: (c, s) => {
      if (parsePortRange(s) === undefined) {
        throw new UsageError(`--proxy-port-range: invalid value ${JSON.stringify(s)} (MIN-MAX or MIN+N)`);
      }
      c.v.portRange = s;
    },
  },
  // trace only.
  ...(["src", "dst", "dport", "proto", "from", "rules", "output", "node-ip"] as const).map((name) => ({
    name,
    origin: "trace" as const,
    type: "string",
    default: "",
    withConfig: true,
    help: "trace",
  })),
];

const BY_NAME = new Map(FLAGS.map((f) => [f.name, f]));

/** Usage text for `--help`, from the flag table. */
export const USAGE = (() => {
  const line = (f: FlagDef) => {
    const head = `  ${f.shorthand ? `-${f.shorthand}, ` : ""}--${f.name}${f.bool ? "" : ` ${f.type}`}`;
    const def = f.default === "" || (f.bool && f.default === "false") ? "" : ` (default ${f.default})`;
    return `${head.padEnd(44)} ${f.help}${def}`;
  };
  return `Usage: kube-proxy-deno [render|trace] [flags]

Makes Kubernetes Services reachable on this node (a drop-in kube-proxy).

Commands:
  (none)    run the proxy
  render    print what a full sync of --proxy-mode would apply, touching nothing (needs --source=file:PATH;
            the node's addresses: --node-ip IP[,IP], else the Node object's in the source)
  trace     where one new connection goes: --dst IP --dport N [--proto tcp|udp|sctp] [--src IP]
            [--from pod|node|external] [--rules FILE] [--node-ip IP] [--output text|json]

Flags of upstream kube-proxy 1.36 (same names, defaults and meanings; "_" and "-" alike):
${FLAGS.filter((f) => f.origin === "upstream").map(line).join("\n")}

This program's own flags:
${FLAGS.filter((f) => f.origin === "ours").map(line).join("\n")}
`;
})();

/** Usage text for `trace --help`. */
export const TRACE_USAGE = `Usage: kube-proxy-deno trace --dst IP --dport N [flags]

Says where one new connection goes through this node's service rules: the rules it hits, the
endpoints it can reach with their shares, whether it is masqueraded, and the verdict (DNAT,
REJECT, DROP, or not a service). Reads the live rules (read only; needs root) or a file, and
changes nothing.

Flags:
  --dst IP              destination address (a cluster IP, node address, external or LB IP)
  --dport N             destination port
  --proto P             tcp (default), udp or sctp
  --from WHERE          node (default without --src: a process on this node), pod (a pod on this
                        node; the default with --src) or external (another host)
  --src IP              source address (default for --from=node: the node's address of the family)
  --node-ip IP[,IP]     this node's addresses (default: this machine's interfaces)
  --rules FILE          trace the rules of a file (a render output, or iptables-save output)
                        instead of the live ones
  --proxy-mode MODE     the mode whose rules to read (iptables, nftables, ipvs); default: the
                        mode whose rules the node (or the --rules file) holds
  --output FORMAT       text (default) or json
`;

/**
 * Parses the command line (without the program name) into the configuration to run with.
 * @throws {UsageError} for any unknown flag or bad value; the message names both.
 */
export function parseCommandLine(argv: readonly string[], readFile = Deno.readTextFileSync): ParsedCommand {
  const { flags, positionals } = scanArgs(argv, FLAGS);
  const given = (name: string) => flags.findLast((f) => f.name === name)?.value;
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
  const help = bool(given, "help");
  // `trace --help` explains trace; its flags need not be complete for that.
  const trace = positionals[0] === "trace" && !help ? parseTrace(given) : undefined;
  if (positionals[0] !== "trace") {
    // render takes --node-ip too: the addresses the rendered node would have.
    const misplaced = flags.find((f) =>
      BY_NAME.get(f.name)!.origin === "trace" && !(positionals[0] === "render" && f.name === "node-ip")
    );
    if (misplaced !== undefined) throw new UsageError(`--${misplaced.name}: only the trace command takes it`);
  }
  const configFile = given("config");
  const writeConfigTo = given("write-config-to");
  const warnings: string[] = [];
  const fromFile = configFile !== undefined;
  // With --config the file replaces the flags' defaults (defaulted as upstream's decoding does).
  const ctx: FlagContext = {
    v: fromFile ? readConfigFile(configFile, readFile, warnings) : defaultKubeProxyConfiguration(),
    own: defaultOwnFlags(),
    late: new Map(),
    healthzPort: HEALTHZ_PORT,
    metricsPort: METRICS_PORT,
    notes: warnings,
  };
  if (fromFile) {
    const ignored = [
      ...new Set(flags.filter((f) => !BY_NAME.get(f.name)!.withConfig).map((f) => `--${f.name}`)),
    ];
    if (ignored.length > 0) warnings.push(`--config is set: ignoring flags ${ignored.join(", ")}`);
  }
  for (const f of flags) {
    const def = BY_NAME.get(f.name)!;
    if (fromFile && !def.withConfig) continue;
    def.apply?.(ctx, f.value);
  }
  if (!fromFile) applyLate(ctx, writeConfigTo !== undefined);
  // Upstream's processHostnameOverrideFlag: the flag wins over the file; empty means unset.
  const hostname = given("hostname-override");
  if (hostname !== undefined && hostname !== "") {
    if (hostname.trim() === "") {
      throw new UsageError("--hostname-override: empty hostname-override is invalid");
    }
    ctx.v.hostnameOverride = parseNodeName("--hostname-override", hostname);
  } else if (fromFile && ctx.v.hostnameOverride !== "") {
    ctx.v.hostnameOverride = parseNodeName(
      `--config: ${configFile}: hostnameOverride`,
      ctx.v.hostnameOverride,
    );
  }
  const modeChosen = ctx.v.mode !== "";
  const v = platformDefaults(ctx.v);
  const errors = validate(v);
  if (errors.length > 0) throw new UsageError(errors.map((e) => describe(e, v, configFile)).join("; "));
  const config = toProxyConfig(v, ctx.own);
  const command = help
    ? "help"
    : given("version") !== undefined && given("version") !== "false"
    ? "version"
    : writeConfigTo !== undefined
    ? "write-config"
    : bool(given, "cleanup")
    ? "cleanup"
    : bool(given, "init-only")
    ? "init-only"
    : positionals[0] === "render"
    ? "render"
    : positionals[0] === "trace"
    ? "trace"
    : "run";
  return {
    command,
    config,
    kubeProxyConfiguration: v,
    writeConfigTo,
    warnings,
    notApplying: notApplying(config, flags),
    flagValues: FLAGS.filter((f) => f.origin !== "trace").map((
      f,
    ) => [`--${f.name}`, given(f.name) ?? f.default]),
    configFile,
    trace: trace === undefined ? undefined : { ...trace, modeChosen },
    usage: positionals[0] === "trace" ? TRACE_USAGE : USAGE,
    renderNodeIPs: positionals[0] === "render" && given("node-ip") !== undefined
      ? nodeIPList(given("node-ip")!)
      : undefined,
  };
}

/** Reads and decodes the `--config` file, defaulted; its unknown fields go to `warnings`. */
function readConfigFile(
  path: string,
  readFile: (path: string) => string,
  warnings: string[],
): KubeProxyConfiguration {
  let text: string;
  try {
    text = readFile(path);
  } catch (e) {
    throw new UsageError(`--config: cannot read ${JSON.stringify(path)}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  const decoded = decodeConfigFile(text, path);
  warnings.push(...decoded.warnings);
  return setDefaults(decoded.config);
}

function bool(given: (name: string) => string | undefined, name: string): boolean {
  const s = given(name);
  return s !== undefined && parseBool(`--${name}`, s);
}

/**
 * What upstream's `processV1Alpha1Flags` and `Complete` do after the flags: the sync-period flags of
 * the mode in use (upstream starts every mode from iptables' defaulted periods), and the deprecated
 * port flags joined to their addresses.
 */
function applyLate(c: FlagContext, writing: boolean): void {
  const flag = c.v.mode === "ipvs" ? "ipvs" : "iptables";
  const sync = c.late.get(`${flag}-sync-period`) ?? c.v.iptables.syncPeriod;
  const min = c.late.get(`${flag}-min-sync-period`) ?? c.v.iptables.minSyncPeriod;
  const section = c.v[modeSection(c.v.mode)];
  section.syncPeriod = sync;
  section.minSyncPeriod = min;
  if (!writing) {
    c.v.healthzBindAddress = c.healthzPort === 0
      ? ""
      : appendPortIfNeeded(c.v.healthzBindAddress, c.healthzPort);
    c.v.metricsBindAddress = c.metricsPort === 0
      ? ""
      : appendPortIfNeeded(c.v.metricsBindAddress, c.metricsPort);
  }
}

/** A validation error, naming the file and field, or the flag that set the field. */
function describe(e: FieldError, v: KubeProxyConfiguration, configFile?: string): string {
  if (configFile !== undefined) return `--config: ${configFile}: ${e.field}: ${e.message}`;
  const section = modeSection(v.mode);
  const periodFlag = section === "ipvs" ? "ipvs" : "iptables";
  const flag = e.field === `${section}.syncPeriod`
    ? `${periodFlag}-sync-period`
    : e.field === `${section}.minSyncPeriod`
    ? `${periodFlag}-min-sync-period`
    : FLAGS.find((f) => f.field !== undefined && e.field.replace(/\[\d+\]$/, "") === f.field)?.name;
  return `${flag === undefined ? e.field : `--${flag}`}: ${e.message}`;
}

/** Each setting given that has no effect here, with why (named once at start). */
function notApplying(c: ProxyConfig, flags: readonly FlagUse[]): string[] {
  const out: string[] = [];
  for (const name of new Set(flags.map((f) => f.name))) {
    const why = BY_NAME.get(name)!.notApplying;
    if (why !== undefined) out.push(`--${name} does not apply: ${why}`);
  }
  if (c.enableProfiling) {
    out.push(
      `profiling (--profiling, enableProfiling) does not apply: upstream serves Go's pprof; this program has no profiler`,
    );
  }
  const gates = Object.entries(c.featureGates);
  if (gates.length > 0) {
    out.push(
      `featureGates ${gates.map(([k, v]) => `${k}=${v}`).join(",")} do not apply: this program has no ` +
        "feature gates; what it implements is always on",
    );
  }
  if (c.showHiddenMetricsForVersion !== "") {
    out.push("showHiddenMetricsForVersion does not apply: this program hides no metric");
  }
  const win = c.winkernel;
  if (
    c.windowsRunAsService || win.networkName !== "" || win.sourceVip !== "" || win.enableDSR ||
    win.rootHnsEndpointName !== "" || win.forwardHealthCheckVip
  ) {
    out.push("winkernel and windowsRunAsService are Windows-only; ignored on Linux");
  }
  const lg = c.logging;
  if (lg.vmodule.length > 0) out.push("logging.vmodule (--vmodule) does not apply: --v filters every record");
  if (lg.textSplitStream || lg.jsonSplitStream) {
    out.push("logging split streams (--log-*-split-stream) do not apply: every record goes to stderr");
  }
  if (!isZeroQuantity(lg.textInfoBufferSize) || !isZeroQuantity(lg.jsonInfoBufferSize)) {
    out.push(
      "logging info buffer sizes (--log-*-info-buffer-size) do not apply: records are written at once",
    );
  }
  return out;
}

/** Reads `--node-ip`'s comma-separated addresses. @throws {UsageError} naming the flag. */
function nodeIPList(text: string): string[] {
  return text.split(",").map((ip) => parseIP("--node-ip", ip.trim()));
}

/** Reads the `trace` flags. @throws {UsageError} naming the flag. */
function parseTrace(given: (name: string) => string | undefined): Omit<TraceQuery, "modeChosen"> {
  const dst = given("dst");
  if (dst === undefined) throw new UsageError("--dst: trace needs the destination address");
  parseIP("--dst", dst);
  const dport = given("dport");
  if (dport === undefined) throw new UsageError("--dport: trace needs the destination port");
  const port = int("dport", dport, 1, 65535);
  const proto = given("proto") ?? "tcp";
  if (proto !== "tcp" && proto !== "udp" && proto !== "sctp") {
    throw new UsageError(`--proto: invalid value ${JSON.stringify(proto)} (tcp, udp or sctp)`);
  }
  const src = given("src");
  const from = given("from") ?? (src === undefined ? "node" : "pod");
  if (from !== "pod" && from !== "node" && from !== "external") {
    throw new UsageError(`--from: invalid value ${JSON.stringify(from)} (pod, node or external)`);
  }
  if (src !== undefined) parseIP("--src", src);
  else if (from !== "node") throw new UsageError(`--src: trace --from=${from} needs the source address`);
  const output = given("output") ?? "text";
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output: invalid value ${JSON.stringify(output)} (text or json)`);
  }
  const nodeIP = given("node-ip");
  const nodeIPs = nodeIP === undefined ? [] : nodeIPList(nodeIP);
  return { src, dst, port, protocol: proto, from, rulesFile: given("rules"), output, nodeIPs };
}
