/**
 * Upstream's validation of a KubeProxyConfiguration (`pkg/proxy/apis/config/validation`), with its
 * messages, plus the checks of this program's own fields and of every value that reaches a kernel
 * batch (interface names, schedulers).
 * @module
 */
import { SCHEDULERS } from "../model/service_port.ts";
import { cidrFamily, ipFamily } from "../model/net.ts";
import { NODE_PORT_KEYWORDS } from "../model/nodeport_addresses.ts";
import { MAX_TCP_WORKERS, PROXY_MODES, UPSTREAM_VERSION } from "./config.ts";
import { formatDuration } from "./duration.ts";
import { FeatureGates } from "./feature_gates.ts";
import { type KubeProxyConfiguration, modeSection, splitHostPort } from "./kube_proxy_configuration.ts";
import { parsePortRange } from "./values.ts";
import { isPrime, MAX_MAGLEV_TABLE_SIZE, MIN_MAGLEV_TABLE_SIZE } from "../../loadbalancer/maglev.ts";

/** One problem: the field (as the file names it) and upstream's message. */
export interface FieldError {
  readonly field: string;
  readonly message: string;
}

/** The modes this program accepts (upstream's Linux modes, and ours). */
const LOCAL_MODES = ["ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", ""];
/**
 * A Linux interface name (at most 15 bytes) of the characters that are safe inside an iptables
 * argument and an nft string; a prefix may not hold the wildcards both tools add (`+`, `*`).
 */
export const INTERFACE = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,14}$/;

/** Returns every problem of `c` (empty when it is valid), as upstream's `Validate` and ours. */
export function validate(c: KubeProxyConfiguration): FieldError[] {
  const errs: FieldError[] = [];
  const invalid = (field: string, value: unknown, message: string) =>
    errs.push({ field, message: `Invalid value: ${JSON.stringify(value)}: ${message}` });
  const atLeastZero = (field: string, ms: number | null) => {
    if (ms !== null && ms < 0) invalid(field, formatDuration(ms), "must be greater than or equal to 0");
  };
  const bit = (field: string, b: number | null) => {
    if (b !== null && (b < 0 || b > 31)) invalid(field, b, "must be within the range [0, 31]");
  };

  try {
    new FeatureGates(c.featureGates);
  } catch (e) {
    invalid("featureGates", c.featureGates, (e as Error).message);
  }
  bit("iptables.masqueradeBit", c.iptables.masqueradeBit);
  if (c.mode === "nftables") bit("nftables.masqueradeBit", c.nftables.masqueradeBit);
  if (c.mode === "ipvs") {
    atLeastZero("ipvs.tcpTimeout", c.ipvs.tcpTimeout);
    atLeastZero("ipvs.tcpFinTimeout", c.ipvs.tcpFinTimeout);
    atLeastZero("ipvs.udpTimeout", c.ipvs.udpTimeout);
    (c.ipvs.excludeCIDRs ?? []).forEach((x, i) => {
      if (cidrFamily(x) === undefined) invalid(`ipvs.excludeCIDRs[${i}]`, x, "must be a valid CIDR");
    });
  }
  if (c.ipvs.scheduler !== "" && !SCHEDULERS.has(c.ipvs.scheduler)) {
    invalid("ipvs.scheduler", c.ipvs.scheduler, `must be one of ${[...SCHEDULERS].join(", ")}`);
  }

  const ct = c.conntrack;
  if (ct.maxPerCore !== null && ct.maxPerCore < 0) {
    invalid("conntrack.maxPerCore", ct.maxPerCore, "must be greater than or equal to 0");
  }
  if (ct.min !== null && ct.min < 0) invalid("conntrack.min", ct.min, "must be greater than or equal to 0");
  atLeastZero("conntrack.tcpEstablishedTimeout", ct.tcpEstablishedTimeout);
  atLeastZero("conntrack.tcpCloseWaitTimeout", ct.tcpCloseWaitTimeout);
  atLeastZero("conntrack.udpTimeout", ct.udpTimeout);
  atLeastZero("conntrack.udpStreamTimeout", ct.udpStreamTimeout);
  if (c.oomScoreAdj !== null && (c.oomScoreAdj < -1000 || c.oomScoreAdj > 1000)) {
    invalid("oomScoreAdj", c.oomScoreAdj, "must be within the range [-1000, 1000]");
  }

  if (c.mode !== "" && !(PROXY_MODES as readonly string[]).includes(c.mode)) {
    invalid(
      "mode",
      c.mode,
      "must be iptables, ipvs, nftables, userspace or blank (blank means the best-available proxy [currently iptables])",
    );
  }
  if (c.clientConnection.burst < 0) {
    invalid("clientConnection.burst", c.clientConnection.burst, "must be greater than or equal to 0");
  }
  if (c.configSyncPeriod <= 0) {
    invalid("configSyncPeriod", formatDuration(c.configSyncPeriod), "must be greater than 0");
  }
  const section = modeSection(c.mode);
  const { syncPeriod, minSyncPeriod } = c[section];
  if (syncPeriod <= 0) invalid(`${section}.syncPeriod`, formatDuration(syncPeriod), "must be greater than 0");
  if (minSyncPeriod < 0) {
    invalid(`${section}.minSyncPeriod`, formatDuration(minSyncPeriod), "must be greater than or equal to 0");
  }
  if (minSyncPeriod > syncPeriod) {
    invalid(
      `${section}.syncPeriod`,
      formatDuration(minSyncPeriod),
      `must be greater than or equal to ${section}.minSyncPeriod`,
    );
  }

  if (ipFamily(c.bindAddress) === undefined) {
    invalid("bindAddress", c.bindAddress, "not a valid textual representation of an IP address");
  }
  // An empty address disables the server (ours for metrics: upstream cannot turn it off).
  hostPort(errs, "healthzBindAddress", c.healthzBindAddress);
  hostPort(errs, "metricsBindAddress", c.metricsBindAddress);
  if (parsePortRange(c.portRange) === undefined) {
    invalid("portRange", c.portRange, "must be a valid port range (e.g. 300-2000)");
  }
  // Upstream 1.37: CIDRs and the keywords, combinable (1.36 took `primary` alone or CIDRs).
  for (const [i, x] of (c.nodePortAddresses ?? []).entries()) {
    if (!NODE_PORT_KEYWORDS.includes(x) && cidrFamily(x) === undefined) {
      invalid(
        `nodePortAddresses[${i}]`,
        x,
        `must be a valid CIDR or one of ${NODE_PORT_KEYWORDS.map((k) => `'${k}'`).join(", ")}`,
      );
    }
  }
  const hidden = `${UPSTREAM_VERSION.major}.${UPSTREAM_VERSION.minor - 1}`;
  if (c.showHiddenMetricsForVersion !== "" && c.showHiddenMetricsForVersion !== hidden) {
    invalid(
      "showHiddenMetricsForVersion",
      c.showHiddenMetricsForVersion,
      `--show-hidden-metrics-for-version must be omitted or have the value '${hidden}'. ` +
        "Only the previous minor version is allowed",
    );
  }

  if (!LOCAL_MODES.includes(c.detectLocalMode)) {
    errs.push({
      field: "detectLocalMode",
      message: `Unsupported value: ${JSON.stringify(c.detectLocalMode)}: supported values: ${
        LOCAL_MODES.map((m) => JSON.stringify(m)).join(", ")
      }`,
    });
  }
  const iface = (field: string, name: string, mode: string) => {
    if (name === "") invalid(field, name, "must not be empty");
    else if (!INTERFACE.test(name)) {
      invalid(
        field,
        name,
        `must be an interface name of at most 15 letters, digits, "_", ".", "@" or "-" (${mode})`,
      );
    }
  };
  if (c.detectLocalMode === "BridgeInterface") {
    iface("detectLocal.bridgeInterface", c.detectLocal.bridgeInterface, "BridgeInterface");
  }
  if (c.detectLocalMode === "InterfaceNamePrefix") {
    iface("detectLocal.interfaceNamePrefix", c.detectLocal.interfaceNamePrefix, "InterfaceNamePrefix");
  }
  if (c.clusterCIDR !== "") {
    const cidrs = c.clusterCIDR.split(",").map((x) => x.trim());
    const pair =
      "must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]";
    if (cidrs.length > 2) invalid("clusterCIDR", c.clusterCIDR, pair);
    else {
      cidrs.forEach((x, i) => {
        if (cidrFamily(x) === undefined) {
          invalid(
            `clusterCIDR[${i}]`,
            x,
            "must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)",
          );
        }
      });
      if (cidrs.length === 2 && cidrs.every((x) => cidrFamily(x) !== undefined)) {
        if (cidrFamily(cidrs[0]) === cidrFamily(cidrs[1])) invalid("clusterCIDR", c.clusterCIDR, pair);
      }
    }
  }

  const lg = c.logging;
  if (lg.format !== "text" && lg.format !== "json") {
    errs.push({
      field: "logging.format",
      message: `Unsupported value: ${JSON.stringify(lg.format)}: supported values: "json", "text"`,
    });
  }
  if (lg.verbosity < 0) invalid("logging.verbosity", lg.verbosity, "must be greater than or equal to 0");
  if (lg.format !== "text" && (lg.vmodule ?? []).length > 0) {
    errs.push({ field: "logging.vmodule", message: "Forbidden: Only supported for text log format" });
  }

  // Ours.
  if (c.udpIdleTimeout <= 0) {
    invalid("udpIdleTimeout", formatDuration(c.udpIdleTimeout), "must be greater than 0");
  }
  atLeastZero("tcpIdleTimeout", c.tcpIdleTimeout);
  atLeastZero("tcpWriteTimeout", c.tcpWriteTimeout);
  const w = c.userspaceTcpWorkers;
  if (w !== null && (w < 0 || w > MAX_TCP_WORKERS)) {
    invalid("userspaceTcpWorkers", w, `must be within the range [0, ${MAX_TCP_WORKERS}]`);
  }
  const m = c.maglevTableSize;
  if (m !== null && (m < MIN_MAGLEV_TABLE_SIZE || m > MAX_MAGLEV_TABLE_SIZE || !isPrime(m))) {
    invalid(
      "maglevTableSize",
      m,
      `must be a prime within the range [${MIN_MAGLEV_TABLE_SIZE}, ${MAX_MAGLEV_TABLE_SIZE}] (e.g. 1021, 4093, 16381, 65521)`,
    );
  }
  if (c.maglevSeed !== null && c.maglevSeed < 0) {
    invalid("maglevSeed", c.maglevSeed, "must be greater than or equal to 0");
  }
  return errs;
}

/** Upstream's `validateHostPort`, for a non-empty address. */
function hostPort(errs: FieldError[], field: string, s: string): void {
  if (s === "") return;
  const hp = splitHostPort(s);
  if (hp === undefined) {
    errs.push({ field, message: `Invalid value: ${JSON.stringify(s)}: must be IP:port` });
    return;
  }
  if (ipFamily(hp.host) === undefined) {
    errs.push({ field, message: `Invalid value: ${JSON.stringify(hp.host)}: must be a valid IP` });
  }
  if (!/^\d{1,5}$/.test(hp.port) || Number(hp.port) < 1 || Number(hp.port) > 65535) {
    errs.push({ field, message: `Invalid value: ${JSON.stringify(hp.port)}: must be a valid port` });
  }
}
