/**
 * `kubeproxy.config.k8s.io/v1alpha1` KubeProxyConfiguration files, strictly decoded as upstream.
 * @module
 */
import { load as loadYaml } from "js-yaml";
import { UsageError } from "../errors.ts";
import { MAX_TCP_WORKERS, type ProxyConfig } from "./config.ts";
import {
  durationFlag,
  intFlag,
  parseBind,
  parseCIDRs,
  parseIP,
  parseLocalMode,
  parseMode,
  parseNodeName,
  parseNodePortAddresses,
  parsePortRange,
  parseScheduler,
} from "./values.ts";

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
      { cause: e },
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
    "tcpIdleTimeout",
    "tcpWriteTimeout",
    "userspaceTcpWorkers",
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
  // Ours (upstream's userspace proxy had neither): top-level beside udpIdleTimeout.
  if (d.tcpIdleTimeout !== undefined) c.tcpIdleTimeoutMs = dur("tcpIdleTimeout", d.tcpIdleTimeout, 0);
  if (d.tcpWriteTimeout !== undefined) c.tcpWriteTimeoutMs = dur("tcpWriteTimeout", d.tcpWriteTimeout, 0);
  if (d.userspaceTcpWorkers !== undefined && d.userspaceTcpWorkers !== null) {
    c.userspaceTcpWorkers = intFlag(
      where("userspaceTcpWorkers"),
      String(d.userspaceTcpWorkers),
      0,
      MAX_TCP_WORKERS,
    );
  }
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
    c.nodePortAddresses = parseNodePortAddresses(
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
  // Each mode reads its own section, as upstream; every section is still checked for unknown fields.
  const sections = {
    iptables: sub("iptables", [
      "masqueradeAll",
      "masqueradeBit",
      "syncPeriod",
      "minSyncPeriod",
      "localhostNodePorts",
    ]),
    nftables: sub("nftables", ["masqueradeAll", "masqueradeBit", "syncPeriod", "minSyncPeriod"]),
  };
  const own = c.mode === "nftables" ? "nftables" : "iptables";
  for (const [name, sec] of Object.entries(sections)) {
    if (sec === undefined) continue;
    const field = (f: string) => `${name}.${f}`;
    // Parse every section (so a bad value is reported), apply the mode's own.
    const masqueradeAll = sec.masqueradeAll === undefined
      ? undefined
      : bool(field("masqueradeAll"), sec.masqueradeAll);
    const masqueradeBit = sec.masqueradeBit === undefined || sec.masqueradeBit === null
      ? undefined
      : intFlag(where(field("masqueradeBit")), String(sec.masqueradeBit), 0, 31);
    const syncPeriod = sec.syncPeriod === undefined ? undefined : dur(field("syncPeriod"), sec.syncPeriod, 1);
    const minSync = sec.minSyncPeriod === undefined
      ? undefined
      : dur(field("minSyncPeriod"), sec.minSyncPeriod, 0);
    const localhost = sec.localhostNodePorts === undefined
      ? undefined
      : bool(field("localhostNodePorts"), sec.localhostNodePorts);
    if (name !== own) continue;
    if (masqueradeAll !== undefined) c.masqueradeAll = masqueradeAll;
    if (masqueradeBit !== undefined) c.masqueradeBit = masqueradeBit;
    if (syncPeriod !== undefined) c.syncPeriodMs = syncPeriod;
    if (minSync !== undefined) c.minSyncPeriodMs = minSync;
    if (localhost !== undefined) c.localhostNodePorts = localhost;
  }
  const iv = sub("ipvs", [
    "scheduler",
    "excludeCIDRs",
    "strictARP",
    "syncPeriod",
    "minSyncPeriod",
    "tcpTimeout",
    "tcpFinTimeout",
    "udpTimeout",
  ]);
  if (iv !== undefined) {
    const ipvs = c.ipvs;
    if (iv.scheduler !== undefined && iv.scheduler !== "") {
      ipvs.scheduler = parseScheduler(where("ipvs.scheduler"), str("ipvs.scheduler", iv.scheduler));
    }
    if (iv.excludeCIDRs !== undefined && iv.excludeCIDRs !== null) {
      if (!Array.isArray(iv.excludeCIDRs)) throw new UsageError(`${where("ipvs.excludeCIDRs")}: want a list`);
      ipvs.excludeCIDRs = parseCIDRs(
        where("ipvs.excludeCIDRs"),
        iv.excludeCIDRs.map((x) => str("ipvs.excludeCIDRs[]", x)).join(","),
      );
    }
    if (iv.strictARP !== undefined) ipvs.strictARP = bool("ipvs.strictARP", iv.strictARP);
    if (iv.syncPeriod !== undefined) ipvs.syncPeriodMs = dur("ipvs.syncPeriod", iv.syncPeriod, 1);
    if (iv.minSyncPeriod !== undefined) ipvs.minSyncPeriodMs = dur("ipvs.minSyncPeriod", iv.minSyncPeriod, 0);
    if (iv.tcpTimeout !== undefined) ipvs.tcpTimeoutMs = dur("ipvs.tcpTimeout", iv.tcpTimeout, 0);
    if (iv.tcpFinTimeout !== undefined) ipvs.tcpFinTimeoutMs = dur("ipvs.tcpFinTimeout", iv.tcpFinTimeout, 0);
    if (iv.udpTimeout !== undefined) ipvs.udpTimeoutMs = dur("ipvs.udpTimeout", iv.udpTimeout, 0);
  }
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
