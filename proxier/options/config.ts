/**
 * The whole configuration of one run, with upstream kube-proxy's defaults.
 * @module
 */

/** The proxy modes a flag or config file may name; `proxier/modes.ts` says which are built. */
export type ProxyMode = "iptables" | "ipvs" | "nftables" | "userspace";

/** Where objects come from. */
export type SourceSpec = { kind: "kubernetes" } | { kind: "file"; path: string };

/** Which iptables backend to run: as the host's other rules (auto), or forced. */
export type IptablesBackend = "auto" | "nft" | "legacy";

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
  /** Ours (upstream's images decide in a wrapper script): `--iptables-backend`. */
  iptablesBackend: IptablesBackend;
  /** Userspace mode: program REDIRECT portals for cluster/external IPs (ours, default true). */
  userspacePortals: boolean;
  detectLocalMode: "ClusterCIDR" | "NodeCIDR";
  syncPeriodMs: number;
  minSyncPeriodMs: number;
  configSyncPeriodMs: number;
  healthzBindAddress?: BindAddress;
  metricsBindAddress?: BindAddress;
  udpIdleTimeoutMs: number;
  /** Userspace: close a TCP connection idle this long (0: never). Ours; upstream had none. */
  tcpIdleTimeoutMs: number;
  /** Userspace: close a TCP connection whose peer stopped reading for this long (0: never). Ours. */
  tcpWriteTimeoutMs: number;
  /** Userspace TCP workers; undefined: two per core, at most 8 (ours; the flag allows up to {@linkcode MAX_TCP_WORKERS}). */
  userspaceTcpWorkers?: number;
  portRange: PortRange;
  verbosity: number;
  loggingFormat: "text" | "json";
  source: SourceSpec;
  /** The ipvs mode's own settings (`--ipvs-*`, the config file's `ipvs:`). */
  ipvs: IpvsConfig;
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
  syncPeriodMs: number;
  minSyncPeriodMs: number;
}

/** An inclusive port range; `{ min: 0, max: 0 }` means "any free port". */
export interface PortRange {
  readonly min: number;
  readonly max: number;
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
    iptablesBackend: "auto",
    userspacePortals: true,
    detectLocalMode: "ClusterCIDR",
    syncPeriodMs: 30_000,
    minSyncPeriodMs: 1_000,
    configSyncPeriodMs: 15 * 60_000,
    healthzBindAddress: { hostname: "0.0.0.0", port: 10256 },
    metricsBindAddress: { hostname: "127.0.0.1", port: 10249 },
    udpIdleTimeoutMs: 250,
    tcpIdleTimeoutMs: 3_600_000,
    tcpWriteTimeoutMs: 60_000,
    portRange: { min: 0, max: 0 },
    verbosity: 0,
    loggingFormat: "text",
    source: { kind: "kubernetes" },
    ipvs: {
      scheduler: "rr",
      excludeCIDRs: [],
      strictARP: false,
      tcpTimeoutMs: 0,
      tcpFinTimeoutMs: 0,
      udpTimeoutMs: 0,
      syncPeriodMs: 30_000,
      minSyncPeriodMs: 0,
    },
  };
}

/** Most userspace TCP workers the flag accepts, and the most the default picks. */
export const MAX_TCP_WORKERS = 64;
