/**
 * The whole configuration of one run: upstream kube-proxy's internal configuration (what its flags
 * and its KubeProxyConfiguration file both fill in), plus this program's own settings.
 * @module
 */

import type { FeatureGates } from "./feature_gates.ts";

/**
 * The proxy modes a flag or config file may name: the one list the registry (`proxier/modes.ts`),
 * the flow table's adapters and the end-to-end list are each typed by, so none can miss a mode.
 */
export const PROXY_MODES = ["iptables", "ipvs", "nftables", "userspace"] as const;

/** One of {@linkcode PROXY_MODES}. */
export type ProxyMode = typeof PROXY_MODES[number];

/** How traffic from this node's pods is told apart (upstream's LocalMode). */
export type LocalMode = "ClusterCIDR" | "NodeCIDR" | "BridgeInterface" | "InterfaceNamePrefix";

/** Where objects come from. */
export type SourceSpec = { kind: "kubernetes" } | { kind: "file"; path: string };

/** Which iptables backend to run: as the host's other rules (auto), or forced. */
export type IptablesBackend = "auto" | "nft" | "legacy";

/** A `host:port` to listen on; undefined disables the server. */
export interface BindAddress {
  readonly hostname: string;
  readonly port: number;
}

/**
 * Conntrack tuning, as upstream's `conntrack:` section: null (a pointer left unset) and 0 leave the
 * kernel's value alone.
 */
export interface ConntrackConfig {
  maxPerCore: number | null;
  min: number | null;
  tcpEstablishedTimeoutMs: number | null;
  tcpCloseWaitTimeoutMs: number | null;
  tcpBeLiberal: boolean;
  udpTimeoutMs: number;
  udpStreamTimeoutMs: number;
}

/** Upstream's `clientConnection:` (the kubeconfig path is {@linkcode ProxyConfig.kubeconfig}). */
export interface ClientConnectionConfig {
  acceptContentTypes: string;
  contentType: string;
  qps: number;
  burst: number;
}

/** component-base's LoggingConfiguration, as upstream's `logging:` and logging flags. */
export interface LoggingConfig {
  format: "text" | "json";
  verbosity: number;
  flushFrequencyMs: number;
  /** `pattern=N` entries (`--vmodule`). */
  vmodule: Array<{ filePattern: string; verbosity: number }>;
  textSplitStream: boolean;
  textInfoBufferSize: string;
  jsonSplitStream: boolean;
  jsonInfoBufferSize: string;
}

/** Upstream's Windows-only `winkernel:` section: kept so a file round-trips; nothing here reads it. */
export interface WinkernelConfig {
  networkName: string;
  sourceVip: string;
  enableDSR: boolean;
  rootHnsEndpointName: string;
  forwardHealthCheckVip: boolean;
}

/** The whole configuration of one run. */
export interface ProxyConfig {
  mode: ProxyMode;
  kubeconfig: string;
  master: string;
  clientConnection: ClientConnectionConfig;
  hostnameOverride: string;
  /** Upstream: the node's primary IP override; userspace mode also listens on it. */
  bindAddress: string;
  /** Exit when a health or metrics listener cannot bind (false: retry every 5 s). */
  bindAddressHardFail: boolean;
  enableProfiling: boolean;
  showHiddenMetricsForVersion: string;
  /** The feature gates in effect: upstream's, with its defaults, and those set (`--feature-gates`). */
  features: FeatureGates;
  clusterCIDRs: string[];
  nodePortAddresses: string[];
  masqueradeAll: boolean;
  /** The iptables and ipvs modes' mark bit (`iptables.masqueradeBit`). */
  masqueradeBit: number;
  /** The nftables mode's mark bit (`nftables.masqueradeBit`; `--iptables-masquerade-bit` does not set it, as upstream). */
  nftablesMasqueradeBit: number;
  localhostNodePorts: boolean;
  /** Ours (upstream's images decide in a wrapper script): `--iptables-backend`. */
  iptablesBackend: IptablesBackend;
  /** Userspace mode: program REDIRECT portals for cluster/external IPs (ours, default true). */
  userspacePortals: boolean;
  /** Ours: `--kernel-tool-timeout` (ms; 0: never). */
  kernelToolTimeoutMs: number;
  /**
   * Ours: `--migration-drain-timeout` (ms; 0: none): how long another mode's connections that only
   * its own datapath carries (ipvs) keep that datapath after this mode takes the node over.
   */
  migrationDrainTimeoutMs: number;
  detectLocalMode: LocalMode;
  detectLocal: { bridgeInterface: string; interfaceNamePrefix: string };
  /** The mode's sync period (its own section of the config file, or its `--*-sync-period` flag). */
  syncPeriodMs: number;
  minSyncPeriodMs: number;
  configSyncPeriodMs: number;
  healthzBindAddress?: BindAddress;
  metricsBindAddress?: BindAddress;
  oomScoreAdj: number | null;
  conntrack: ConntrackConfig;
  udpIdleTimeoutMs: number;
  /** Userspace: close a TCP connection idle this long (0: never). Ours; upstream had none. */
  tcpIdleTimeoutMs: number;
  /** Userspace: close a TCP connection whose peer stopped reading for this long (0: never). Ours. */
  tcpWriteTimeoutMs: number;
  /** Userspace TCP workers; undefined: two per core, at most 8 (ours; the flag allows up to {@linkcode MAX_TCP_WORKERS}). */
  userspaceTcpWorkers?: number;
  /** nftables: Maglev's table size M, a prime (ours). */
  maglevTableSize: number;
  /** nftables: the cluster-wide seed of the sh, dh and mh hashes and of the Maglev tables (ours). */
  maglevSeed: number;
  portRange: PortRange;
  logging: LoggingConfig;
  source: SourceSpec;
  /** The ipvs mode's own settings (`--ipvs-*`, the config file's `ipvs:`). */
  ipvs: IpvsConfig;
  winkernel: WinkernelConfig;
  windowsRunAsService: boolean;
}

/** `--ipvs-*` / KubeProxyConfiguration `ipvs:`, with upstream's defaults. */
export interface IpvsConfig {
  scheduler: string;
  excludeCIDRs: string[];
  strictARP: boolean;
  /** 0 keeps the kernel's value. */
  tcpTimeoutMs: number;
  tcpFinTimeoutMs: number;
  udpTimeoutMs: number;
}

/** An inclusive port range; `{ min: 0, max: 0 }` means "any free port". */
export interface PortRange {
  readonly min: number;
  readonly max: number;
}

/** Most userspace TCP workers the flag accepts, and the most the default picks. */
export const MAX_TCP_WORKERS = 64;

/** The upstream release whose flags, file format and defaults this program follows. */
export const UPSTREAM_VERSION = { major: 1, minor: 37 } as const;

/** The source port `trace` (and `explain`) give a packet that names none: a fixed ephemeral port (`--sport`). */
export const DEFAULT_SOURCE_PORT = 40000;
