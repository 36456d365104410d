/**
 * The flag table: every flag of upstream kube-proxy 1.37 (Linux) with its name, type, default, help
 * and what it sets, then this program's own flags: the configuration's flags only (a command's own
 * flags are in its folder). `--help`, the generated flag reference (`deno task docs`) and the
 * command line (`cli/command_line.ts`) all read it.
 * @module
 */
import { UsageError } from "../runtime/errors.ts";
import { ipFamily } from "../model/net.ts";
import { MAX_TCP_WORKERS } from "./config.ts";
import {
  DEFAULT_MAGLEV_SEED,
  DEFAULT_MAGLEV_TABLE_SIZE,
  MAX_MAGLEV_TABLE_SIZE,
  MIN_MAGLEV_TABLE_SIZE,
} from "../../loadbalancer/maglev.ts";
import { parseDuration } from "./duration.ts";
import {
  type KubeProxyConfiguration,
  type OwnFlags,
  QUANTITY,
  splitHostPort,
} from "./kube_proxy_configuration.ts";
import { type FlagShape, parseBool } from "./pflag.ts";
import { parseBackend, parseInteger, parseIP, parsePortRange, parseSource, parseURL } from "./values.ts";

/** The state of parsing: the configuration the flags fill in, and what they leave for later. */
export interface FlagContext {
  readonly v: KubeProxyConfiguration;
  readonly own: OwnFlags;
  /** Flags whose meaning depends on others (`--*-sync-period` on the mode, in ms), applied last. */
  readonly late: Map<string, number>;
  healthzPort: number;
  metricsPort: number;
  readonly notes: string[];
}

/** Who defines a flag: upstream, this program, or one of this program's commands (in its own folder). */
export type FlagOrigin = "upstream" | "ours" | "command";

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
  /** What this program does with the flag where it is not simply as upstream (the flag reference's "here"). */
  readonly differs?: string;
  /** The file field it sets, so a validation error names the flag. */
  readonly field?: string;
  readonly apply?: (c: FlagContext, value: string) => void;
}

const int = (flag: string, s: string, min?: number, max?: number): number =>
  parseInteger(`--${flag}`, s, min, max);
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

/** Every flag, upstream's first (in `kube-proxy --help` order), then ours. */
export const FLAGS: readonly FlagDef[] = [
  // Upstream kube-proxy 1.37.
  {
    name: "bind-address",
    origin: "upstream",
    differs:
      "validated; the userspace mode listens on it (kernel modes take the node's IPs from its Node and interfaces)",
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
      "nf_conntrack_tcp_be_liberal=1 (out-of-window packets are not INVALID; with the kernel so set, by this flag or otherwise, no rule drops INVALID packets)",
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
    differs: "every gate of upstream 1.37; AllowServiceExternalIPs, KubeProxyIPVS and " +
      "KubeProxyNFTablesLocalhostNodePorts act, the others change nothing here (named at start)",
    type: "mapStringBool",
    default: "",
    field: "featureGates",
    help: "key=value pairs of upstream 1.37's feature gates (AllAlpha, AllBeta, AllowServiceExternalIPs, " +
      "KubeProxyIPVS, KubeProxyNFTablesLocalhostNodePorts, ... every one upstream knows)",
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
    help: "/healthz, /livez (and our /readyz): IP or IP:PORT (an IP alone takes port 10256); empty disables",
    apply: (c, s) => c.v.healthzBindAddress = ipPort("healthz-bind-address", s),
  },
  {
    name: "healthz-port",
    origin: "upstream",
    differs: "as upstream (deprecated: joins an address given as an IP alone; 0 disables)",
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
    differs: "accepted; requests are JSON whatever is asked, and the start line says so",
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
    differs: "accepted; records are written at once, so any frequency holds",
    type: "duration",
    default: "5s",
    withConfig: true,
    help: "longest time between log flushes (records are written at once here)",
    apply: (c, s) => c.v.logging.flushFrequency = dur("log-flush-frequency", s),
  },
  {
    name: "log-json-info-buffer-size",
    origin: "upstream",
    differs: "accepted; named at start when not 0 (records are written at once)",
    type: "quantity",
    default: "0",
    withConfig: true,
    help: "JSON format, split streams: bytes of info records buffered (records are written at once here)",
    apply: (c, s) => c.v.logging.options.json.infoBufferSize = quantity("log-json-info-buffer-size", s),
  },
  {
    name: "log-json-split-stream",
    origin: "upstream",
    differs: "accepted; named at start when true (every record goes to stderr)",
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
    differs: "accepted; named at start when not 0 (records are written at once)",
    type: "quantity",
    default: "0",
    withConfig: true,
    help: "text format, split streams: bytes of info records buffered (records are written at once here)",
    apply: (c, s) => c.v.logging.options.text.infoBufferSize = quantity("log-text-info-buffer-size", s),
  },
  {
    name: "log-text-split-stream",
    origin: "upstream",
    differs: "accepted; named at start when true (every record goes to stderr)",
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
    differs: "as upstream; empty disables (upstream cannot)",
    type: "ipport",
    default: "127.0.0.1:10249",
    field: "metricsBindAddress",
    help: "/metrics: IP or IP:PORT (an IP alone takes port 10249); empty disables",
    apply: (c, s) => c.v.metricsBindAddress = ipPort("metrics-bind-address", s),
  },
  {
    name: "metrics-port",
    origin: "upstream",
    differs: "as upstream (deprecated: joins an address given as an IP alone; 0 disables)",
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
    help: "CIDRs whose local addresses answer NodePorts, and the keywords primary (the Node's IPs), " +
      "localhost (127.0.0.0/8, ::1) and all; default all (nftables: primary)",
    apply: (c, s) => c.v.nodePortAddresses = [...c.v.nodePortAddresses ?? [], ...list(s)],
  },
  {
    name: "oom-score-adj",
    origin: "upstream",
    differs: "as upstream, through `choom`; a refusal (no CAP_SYS_RESOURCE) is a warning",
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
    differs: "accepted; named at start when true (no pprof here)",
    bool: true,
    type: "bool",
    default: "false",
    help: "serve /debug/pprof (no profiler here; named at start)",
    apply: (c, s) => c.v.enableProfiling = parseBool("--profiling", s),
  },
  {
    name: "proxy-mode",
    origin: "upstream",
    differs: "as upstream, plus `userspace`",
    type: "ProxyMode",
    default: "iptables",
    field: "mode",
    help: "iptables, nftables, ipvs or userspace (ours)",
    apply: (c, s) => c.v.mode = s,
  },
  {
    name: "show-hidden-metrics-for-version",
    origin: "upstream",
    differs: "validated (only `1.36`); named at start (no metric is hidden here)",
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
    differs: "validated; named at start (`--v` filters every record)",
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
    name: "migration-drain-timeout",
    origin: "ours",
    type: "duration",
    default: "15m0s",
    withConfig: true,
    help:
      "taking a node over from the ipvs mode, keep its virtual servers and kube-ipvs0 addresses for the connections they carry until none is left or this long (0: remove them at once)",
    apply: (c, s) => c.own.migrationDrainTimeoutMs = dur("migration-drain-timeout", s),
  },
  {
    name: "take-over",
    origin: "ours",
    bool: true,
    type: "bool",
    default: "false",
    withConfig: true,
    help:
      "start even while another kube-proxy-deno runs on this node (its network namespace): ask it to stop, then take its place (without: wait 10s for it to stop, else exit 2 naming it)",
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
    name: "maglev-table-size",
    origin: "ours",
    type: "int",
    default: String(DEFAULT_MAGLEV_TABLE_SIZE),
    field: "maglevTableSize",
    help:
      `nftables: slots of each Maglev (scheduler mh) lookup table, a prime in [${MIN_MAGLEV_TABLE_SIZE}, ${MAX_MAGLEV_TABLE_SIZE}]; the same on every node`,
    apply: (c, s) => c.v.maglevTableSize = int("maglev-table-size", s),
  },
  {
    name: "maglev-seed",
    origin: "ours",
    type: "int",
    default: String(DEFAULT_MAGLEV_SEED),
    field: "maglevSeed",
    help: "nftables: the seed of the sh, dh and mh hashes and Maglev tables; the same on every node",
    apply: (c, s) => c.v.maglevSeed = int("maglev-seed", s, 0, 2 ** 31 - 1),
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
];

/** The flags by name. */
export const FLAG_BY_NAME: ReadonlyMap<string, FlagDef> = new Map(FLAGS.map((f) => [f.name, f]));
