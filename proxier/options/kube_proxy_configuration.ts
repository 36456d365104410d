/**
 * `kubeproxy.config.k8s.io/v1alpha1` KubeProxyConfiguration, the one shape both the command line
 * and the config file fill in (as upstream, whose flags and file meet in one object): its fields,
 * upstream's defaulting (zero, null and empty mean the default exactly where upstream's
 * `SetDefaults_KubeProxyConfiguration` says so), the Linux platform defaults, and the conversion to
 * the {@linkcode ProxyConfig} the program runs with.
 * @module
 */
import type {
  BindAddress,
  IptablesBackend,
  LocalMode,
  ProxyConfig,
  ProxyMode,
  SourceSpec,
} from "./config.ts";
import { ipFamily, normalizeCIDR } from "../model/net.ts";
import { parsePortRange } from "./values.ts";
import { FeatureGates } from "./feature_gates.ts";
import { NODE_PORT_KEYWORDS } from "../model/nodeport_addresses.ts";
import { DEFAULT_MAGLEV_SEED, DEFAULT_MAGLEV_TABLE_SIZE } from "../../loadbalancer/maglev.ts";

/** The group/version this program reads and writes. */
export const API_VERSION = "kubeproxy.config.k8s.io/v1alpha1";
/** The kind this program reads and writes. */
export const KIND = "KubeProxyConfiguration";

/**
 * A field's wire type: how YAML/JSON decodes into it (Go's rules: null leaves the zero value, a
 * `?` type is a pointer that stays null), and how it is written back.
 */
export type FieldType =
  | "string"
  | "bool"
  | "bool?"
  | "int32"
  | "int32?"
  | "float"
  | "duration"
  | "duration?"
  | "strings?"
  | "boolMap"
  | "quantity"
  | "flushFrequency"
  | "vmodule?"
  | Schema;

/** Field name to type, in the order upstream's types declare them. */
export interface Schema {
  readonly [field: string]: FieldType;
}

/** What upstream's v1alpha1 KubeProxyConfiguration holds (1.37), in its own field names. */
const UPSTREAM_FIELDS = {
  featureGates: "boolMap",
  clientConnection: {
    kubeconfig: "string",
    acceptContentTypes: "string",
    contentType: "string",
    qps: "float",
    burst: "int32",
  },
  logging: {
    format: "string",
    flushFrequency: "flushFrequency",
    verbosity: "int32",
    vmodule: "vmodule?",
    options: {
      text: { splitStream: "bool", infoBufferSize: "quantity" },
      json: { splitStream: "bool", infoBufferSize: "quantity" },
    },
  },
  hostnameOverride: "string",
  bindAddress: "string",
  healthzBindAddress: "string",
  metricsBindAddress: "string",
  bindAddressHardFail: "bool",
  enableProfiling: "bool",
  showHiddenMetricsForVersion: "string",
  mode: "string",
  iptables: {
    masqueradeBit: "int32?",
    masqueradeAll: "bool",
    localhostNodePorts: "bool?",
    syncPeriod: "duration",
    minSyncPeriod: "duration",
  },
  ipvs: {
    syncPeriod: "duration",
    minSyncPeriod: "duration",
    scheduler: "string",
    excludeCIDRs: "strings?",
    strictARP: "bool",
    tcpTimeout: "duration",
    tcpFinTimeout: "duration",
    udpTimeout: "duration",
  },
  nftables: {
    masqueradeBit: "int32?",
    masqueradeAll: "bool",
    syncPeriod: "duration",
    minSyncPeriod: "duration",
  },
  winkernel: {
    networkName: "string",
    sourceVip: "string",
    enableDSR: "bool",
    rootHnsEndpointName: "string",
    forwardHealthCheckVip: "bool",
  },
  windowsRunAsService: "bool",
  detectLocalMode: "string",
  detectLocal: { bridgeInterface: "string", interfaceNamePrefix: "string" },
  clusterCIDR: "string",
  nodePortAddresses: "strings?",
  oomScoreAdj: "int32?",
  conntrack: {
    maxPerCore: "int32?",
    min: "int32?",
    tcpEstablishedTimeout: "duration?",
    tcpCloseWaitTimeout: "duration?",
    tcpBeLiberal: "bool",
    udpTimeout: "duration",
    udpStreamTimeout: "duration",
  },
  configSyncPeriod: "duration",
  portRange: "string",
} as const satisfies Schema;

/**
 * This program's own top-level fields (the userspace mode's; upstream's userspace proxy had the
 * first). Written back only when they differ from their defaults, so a default file is upstream's.
 */
export const OWN_FIELDS = {
  udpIdleTimeout: "duration",
  tcpIdleTimeout: "duration?",
  tcpWriteTimeout: "duration?",
  userspaceTcpWorkers: "int32?",
  maglevTableSize: "int32?",
  maglevSeed: "int32?",
} as const satisfies Schema;

/** Every field a file may hold without a warning: upstream's and ours. */
export const SCHEMA: Schema = { ...UPSTREAM_FIELDS, ...OWN_FIELDS };

/** The Go-side type of each wire type, once decoded (durations in milliseconds). */
type Decoded<T> = T extends "string" | "quantity" ? string
  : T extends "bool" ? boolean
  : T extends "bool?" ? boolean | null
  : T extends "int32" | "float" | "duration" | "flushFrequency" ? number
  : T extends "int32?" | "duration?" ? number | null
  : T extends "strings?" ? string[] | null
  : T extends "boolMap" ? Record<string, boolean>
  : T extends "vmodule?" ? Array<{ filePattern: string; verbosity: number }> | null
  : T extends Schema ? { -readonly [K in keyof T]: Decoded<T[K]> }
  : never;

/** A decoded KubeProxyConfiguration: upstream's fields and ours, durations in milliseconds. */
export type KubeProxyConfiguration = Decoded<typeof UPSTREAM_FIELDS> & Decoded<typeof OWN_FIELDS>;

/** Returns the zero value of `t` (what Go holds before anything is decoded). */
export function zeroOf(t: FieldType): unknown {
  if (typeof t === "object") return Object.fromEntries(Object.entries(t).map(([k, v]) => [k, zeroOf(v)]));
  switch (t) {
    case "string":
      return "";
    case "quantity":
      return "";
    case "bool":
      return false;
    case "int32":
    case "float":
    case "duration":
    case "flushFrequency":
      return 0;
    case "boolMap":
      return {};
    default:
      return null; // pointers and lists
  }
}

/** Returns a KubeProxyConfiguration with every field at its zero value. */
export function newKubeProxyConfiguration(): KubeProxyConfiguration {
  return zeroOf(SCHEMA) as KubeProxyConfiguration;
}

/** A Kubernetes resource quantity (`0`, `10Mi`, `1.5G`), as component-base's info buffer sizes take. */
export const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$/;

/** True for a quantity of zero (`0`, `0Mi`, `0.0`). */
export function isZeroQuantity(q: string): boolean {
  return QUANTITY.test(q) && Number(/^[+-]?(\d+(\.\d*)?|\.\d+)/.exec(q)![0]) === 0;
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/** Upstream's `ports.ProxyHealthzPort` and `ports.ProxyStatusPort`. */
export const HEALTHZ_PORT = 10256;
export const METRICS_PORT = 10249;
/** Upstream's `qos.KubeProxyOOMScoreAdj`. */
export const KUBE_PROXY_OOM_SCORE_ADJ = -999;
/** client-go's default for kube-proxy's requests (upstream's defaulting). */
export const PROTOBUF = "application/vnd.kubernetes.protobuf";

/**
 * Upstream's `AppendPortIfNeeded`: an address already with a port, or one that is not an IP (left
 * for validation to report), is returned as is; an IP gets `port`.
 */
export function appendPortIfNeeded(addr: string, port: number): string {
  if (splitHostPort(addr) !== undefined) return addr;
  if (ipFamily(addr) === undefined) return addr;
  return addr.includes(":") ? `[${addr}]:${port}` : `${addr}:${port}`;
}

/** Splits Go-style `host:port` / `[v6]:port`; undefined when `s` is not of that shape. */
export function splitHostPort(s: string): { host: string; port: string } | undefined {
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):([^:]*)$/.exec(s);
  if (m === null) return undefined;
  return { host: m[1] ?? m[2], port: m[3] };
}

/**
 * Applies upstream's v1alpha1 defaulting in place: a zero duration, a null pointer or an empty
 * string means the default where upstream's defaulting function says so, and nowhere else (e.g.
 * `ipvs.minSyncPeriod: 0s` stays 0, `iptables.minSyncPeriod: 0s` becomes 1s). Returns `c`.
 */
export function setDefaults(c: KubeProxyConfiguration): KubeProxyConfiguration {
  if (c.bindAddress === "") c.bindAddress = "0.0.0.0";
  const v4 = ipFamily(c.bindAddress) !== "IPv6";
  c.healthzBindAddress = c.healthzBindAddress === ""
    ? `${v4 ? "0.0.0.0" : "[::]"}:${HEALTHZ_PORT}`
    : appendPortIfNeeded(c.healthzBindAddress, HEALTHZ_PORT);
  c.metricsBindAddress = c.metricsBindAddress === ""
    ? `${v4 ? "127.0.0.1" : "[::1]"}:${METRICS_PORT}`
    : appendPortIfNeeded(c.metricsBindAddress, METRICS_PORT);
  c.oomScoreAdj ??= KUBE_PROXY_OOM_SCORE_ADJ;
  if (c.iptables.syncPeriod === 0) c.iptables.syncPeriod = 30 * SECOND;
  if (c.iptables.minSyncPeriod === 0) c.iptables.minSyncPeriod = SECOND;
  c.iptables.localhostNodePorts ??= true;
  if (c.ipvs.syncPeriod === 0) c.ipvs.syncPeriod = 30 * SECOND;
  if (c.nftables.syncPeriod === 0) c.nftables.syncPeriod = 30 * SECOND;
  if (c.nftables.minSyncPeriod === 0) c.nftables.minSyncPeriod = SECOND;
  c.conntrack.maxPerCore ??= 32 * 1024;
  c.conntrack.min ??= 128 * 1024;
  c.iptables.masqueradeBit ??= 14;
  c.nftables.masqueradeBit ??= 14;
  c.conntrack.tcpEstablishedTimeout ??= 24 * HOUR;
  c.conntrack.tcpCloseWaitTimeout ??= HOUR;
  if (c.configSyncPeriod === 0) c.configSyncPeriod = 15 * MINUTE;
  if (c.clientConnection.contentType === "") c.clientConnection.contentType = PROTOBUF;
  if (c.clientConnection.qps === 0) c.clientConnection.qps = 5;
  if (c.clientConnection.burst === 0) c.clientConnection.burst = 10;
  // component-base's SetRecommendedLoggingConfiguration.
  if (c.logging.format === "") c.logging.format = "text";
  if (c.logging.flushFrequency === 0) c.logging.flushFrequency = 5 * SECOND;
  for (const o of [c.logging.options.text, c.logging.options.json]) {
    if (o.infoBufferSize === "") o.infoBufferSize = "0";
  }
  // Ours: upstream's userspace proxy defaulted udpIdleTimeout the same way.
  if (c.udpIdleTimeout === 0) c.udpIdleTimeout = 250;
  return c;
}

/** Returns `setDefaults(newKubeProxyConfiguration())`: what upstream starts from before any flag. */
export function defaultKubeProxyConfiguration(): KubeProxyConfiguration {
  return setDefaults(newKubeProxyConfiguration());
}

/** The section of `mode` that holds its sync periods and masquerade-all (upstream's conversion). */
export function modeSection(mode: string): "iptables" | "ipvs" | "nftables" {
  return mode === "ipvs" ? "ipvs" : mode === "nftables" ? "nftables" : "iptables";
}

/**
 * The prefix of the sync-period flags that set `mode`'s periods: `ipvs` (`--ipvs-sync-period`) in
 * ipvs mode, else `iptables`, as upstream's flags (nftables has none of its own).
 */
export function periodFlagPrefix(mode: string): "ipvs" | "iptables" {
  return mode === "ipvs" ? "ipvs" : "iptables";
}

/**
 * The Linux platform defaults upstream applies after flags and file (`platformApplyDefaults`): an
 * empty mode is iptables, nftables answers NodePorts on the node's primary IPs unless told
 * otherwise, and local traffic is told by the cluster CIDR. Returns `c`.
 */
export function platformDefaults(c: KubeProxyConfiguration): KubeProxyConfiguration {
  if (c.mode === "") c.mode = "iptables";
  if (c.mode === "nftables" && (c.nodePortAddresses ?? []).length === 0) c.nodePortAddresses = ["primary"];
  if (c.detectLocalMode === "") c.detectLocalMode = "ClusterCIDR";
  return c;
}

/**
 * `--kernel-tool-timeout`'s default: far above the slowest write a node makes (a full
 * iptables-restore of 10,000 services on nf_tables), far below "never".
 */
export const KERNEL_TOOL_TIMEOUT_MS = 300_000;

/**
 * `--migration-drain-timeout`'s default: IPVS's own timeout of an idle established TCP connection
 * (900 s), so every connection idle since the switch has expired from IPVS by then anyway; one
 * still busy after it is cut.
 */
export const MIGRATION_DRAIN_TIMEOUT_MS = 900_000;

/** Settings that are this program's own and not in the file: `--source`, `--iptables-backend`... */
export interface OwnFlags {
  source: SourceSpec;
  iptablesBackend: IptablesBackend;
  userspacePortals: boolean;
  /** `--kernel-tool-timeout`: a kernel tool still running after this long is killed (0: never). */
  kernelToolTimeoutMs: number;
  /** `--migration-drain-timeout` (0: none). */
  migrationDrainTimeoutMs: number;
  /** `--master`: applies beside `--config`, as upstream's. */
  master: string;
}

/** Returns the defaults of this program's own flags. */
export function defaultOwnFlags(): OwnFlags {
  return {
    source: { kind: "kubernetes" },
    iptablesBackend: "auto",
    userspacePortals: true,
    kernelToolTimeoutMs: KERNEL_TOOL_TIMEOUT_MS,
    migrationDrainTimeoutMs: MIGRATION_DRAIN_TIMEOUT_MS,
    master: "",
  };
}

/**
 * Returns the configuration the program runs with from a validated KubeProxyConfiguration (defaulted,
 * platform defaults applied) and this program's own flags: upstream's v1alpha1-to-internal conversion,
 * where the mode's own section gives the sync periods and masquerade-all.
 */
export function toProxyConfig(c: KubeProxyConfiguration, own: OwnFlags = defaultOwnFlags()): ProxyConfig {
  const section = c[modeSection(c.mode)];
  const lg = c.logging;
  return {
    mode: c.mode as ProxyMode,
    kubeconfig: c.clientConnection.kubeconfig,
    master: own.master,
    clientConnection: {
      acceptContentTypes: c.clientConnection.acceptContentTypes,
      contentType: c.clientConnection.contentType,
      qps: c.clientConnection.qps,
      burst: c.clientConnection.burst,
    },
    hostnameOverride: c.hostnameOverride.trim().toLowerCase(),
    bindAddress: c.bindAddress,
    bindAddressHardFail: c.bindAddressHardFail,
    enableProfiling: c.enableProfiling,
    showHiddenMetricsForVersion: c.showHiddenMetricsForVersion,
    features: new FeatureGates(c.featureGates),
    clusterCIDRs: c.clusterCIDR === "" ? [] : c.clusterCIDR.split(",").map((x) => normalizeCIDR(x.trim())),
    nodePortAddresses: (c.nodePortAddresses ?? []).map((x) =>
      NODE_PORT_KEYWORDS.includes(x) ? x : normalizeCIDR(x)
    ),
    masqueradeAll: (c.mode === "nftables" ? c.nftables : c.iptables).masqueradeAll,
    masqueradeBit: c.iptables.masqueradeBit ?? 14,
    nftablesMasqueradeBit: c.nftables.masqueradeBit ?? 14,
    localhostNodePorts: c.iptables.localhostNodePorts ?? true,
    iptablesBackend: own.iptablesBackend,
    userspacePortals: own.userspacePortals,
    kernelToolTimeoutMs: own.kernelToolTimeoutMs,
    migrationDrainTimeoutMs: own.migrationDrainTimeoutMs,
    detectLocalMode: c.detectLocalMode as LocalMode,
    detectLocal: { ...c.detectLocal },
    syncPeriodMs: section.syncPeriod,
    minSyncPeriodMs: section.minSyncPeriod,
    configSyncPeriodMs: c.configSyncPeriod,
    healthzBindAddress: bindAddress(c.healthzBindAddress),
    metricsBindAddress: bindAddress(c.metricsBindAddress),
    oomScoreAdj: c.oomScoreAdj,
    conntrack: {
      maxPerCore: c.conntrack.maxPerCore,
      min: c.conntrack.min,
      tcpEstablishedTimeoutMs: c.conntrack.tcpEstablishedTimeout,
      tcpCloseWaitTimeoutMs: c.conntrack.tcpCloseWaitTimeout,
      tcpBeLiberal: c.conntrack.tcpBeLiberal,
      udpTimeoutMs: c.conntrack.udpTimeout,
      udpStreamTimeoutMs: c.conntrack.udpStreamTimeout,
    },
    udpIdleTimeoutMs: c.udpIdleTimeout,
    tcpIdleTimeoutMs: c.tcpIdleTimeout ?? HOUR,
    tcpWriteTimeoutMs: c.tcpWriteTimeout ?? MINUTE,
    userspaceTcpWorkers: c.userspaceTcpWorkers ?? undefined,
    maglevTableSize: c.maglevTableSize ?? DEFAULT_MAGLEV_TABLE_SIZE,
    maglevSeed: c.maglevSeed ?? DEFAULT_MAGLEV_SEED,
    portRange: parsePortRange(c.portRange) ?? { min: 0, max: 0 },
    logging: {
      format: lg.format === "json" ? "json" : "text",
      verbosity: lg.verbosity,
      flushFrequencyMs: lg.flushFrequency,
      vmodule: [...lg.vmodule ?? []],
      textSplitStream: lg.options.text.splitStream,
      textInfoBufferSize: lg.options.text.infoBufferSize,
      jsonSplitStream: lg.options.json.splitStream,
      jsonInfoBufferSize: lg.options.json.infoBufferSize,
    },
    source: own.source,
    ipvs: {
      scheduler: c.ipvs.scheduler === "" ? "rr" : c.ipvs.scheduler,
      excludeCIDRs: (c.ipvs.excludeCIDRs ?? []).map(normalizeCIDR),
      strictARP: c.ipvs.strictARP,
      tcpTimeoutMs: c.ipvs.tcpTimeout,
      tcpFinTimeoutMs: c.ipvs.tcpFinTimeout,
      udpTimeoutMs: c.ipvs.udpTimeout,
    },
    winkernel: { ...c.winkernel },
    windowsRunAsService: c.windowsRunAsService,
  };
}

/** `host:port` as the servers take it; "" (a disabled server) is undefined. */
function bindAddress(s: string): BindAddress | undefined {
  const hp = splitHostPort(s);
  return hp === undefined ? undefined : { hostname: hp.host, port: Number(hp.port) };
}

/** Returns the configuration of a run without flags: upstream's defaults. */
export function defaultConfig(): ProxyConfig {
  return toProxyConfig(platformDefaults(defaultKubeProxyConfiguration()));
}
