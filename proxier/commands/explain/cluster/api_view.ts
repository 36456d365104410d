/**
 * The API's current view of one Service, read as a proxy reads it (the model's own conversions of
 * the Service and its EndpointSlices, so a field the proxy skips is skipped here too), and how a
 * node's `explain` report differs from it: ports, cluster IP, node port, and each endpoint with its
 * ready, serving and terminating conditions. Topology, traffic policies and what a mode does with
 * them are the node's own business: its kernel check covers them.
 * @module
 */
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { mergeSlices, type SliceEndpoints, sliceEndpoints } from "../../../model/endpoint.ts";
import { servicePorts } from "../../../model/service_port.ts";
import { type IPFamily, servicePortKey } from "../../../model/types.ts";
import { ValidationError } from "../../../runtime/errors.ts";
import type { ExplainReport } from "../../../read_side/report.ts";

/** One endpoint's conditions. */
export interface ApiEndpoint {
  readonly endpoint: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
}

/** One port of the Service in one family, as the API has it. */
export interface ApiPort {
  readonly family: IPFamily;
  readonly name: string;
  readonly protocol: string;
  readonly port: number;
  readonly clusterIP: string;
  readonly nodePort: number | null;
  readonly endpoints: readonly ApiEndpoint[];
}

/** The API's view of the Service. */
export interface ApiView {
  readonly ports: readonly ApiPort[];
  /** The newest `last-change-trigger-time` of its slices (ms), when they carry one. */
  readonly newestTriggerMs?: number;
  /** The Service's and its slices' resource versions: equal fingerprints, the same objects. */
  readonly fingerprint: string;
  /** What the proxy would skip, as it would say it. */
  readonly warnings: readonly string[];
}

/** How a node's view compares with the API's. */
export interface ApiComparison {
  readonly agrees: boolean;
  /** Each difference, the node's side first. */
  readonly differences: readonly string[];
}

const FAMILIES: readonly IPFamily[] = ["IPv4", "IPv6"];

/**
 * Returns the API's view of `svc` and its `slices`, restricted to `port` (a name or number) when
 * given.
 */
export function apiView(svc: V1Service, slices: readonly V1EndpointSlice[], port?: string): ApiView {
  const warnings: string[] = [];
  const ports: ApiPort[] = [];
  let newest: number | undefined;
  for (const family of FAMILIES) {
    let converted;
    try {
      converted = servicePorts(svc, family);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      warnings.push(e.message);
      continue;
    }
    warnings.push(...converted.warnings);
    const parsed: SliceEndpoints[] = [];
    for (const slice of slices) {
      try {
        const s = sliceEndpoints(slice, family, "");
        if (s === undefined) continue;
        parsed.push(s);
        warnings.push(...s.skipped.map((x) => x.message));
        if (s.triggerTime !== undefined) newest = Math.max(newest ?? 0, s.triggerTime);
      } catch (e) {
        if (!(e instanceof ValidationError)) throw e;
        warnings.push(e.message);
      }
    }
    const endpoints = mergeSlices(parsed);
    for (const p of converted.ports) {
      if (port !== undefined && p.name.port !== port && String(p.port) !== port) continue;
      const key = servicePortKey(p.name);
      ports.push({
        family,
        name: p.name.port,
        protocol: p.protocol,
        port: p.port,
        clusterIP: p.clusterIP,
        nodePort: p.nodePort === 0 ? null : p.nodePort,
        endpoints: (endpoints.get(key) ?? []).map((e) => ({
          endpoint: e.key,
          ready: e.ready,
          serving: e.serving,
          terminating: e.terminating,
        })),
      });
    }
  }
  const versions = [svc, ...slices].map((o) => `${o.metadata?.name}@${o.metadata?.resourceVersion}`).sort();
  return {
    ports: ports.sort((a, b) => a.family.localeCompare(b.family) || a.port - b.port),
    ...(newest === undefined ? {} : { newestTriggerMs: newest }),
    fingerprint: versions.join(","),
    warnings: [...new Set(warnings)],
  };
}

const portLabel = (p: { name: string; port: number; protocol: string; family: string }) =>
  `${p.name === "" ? "" : `${p.name} `}${p.port}/${p.protocol} ${p.family}`;

const conditions = (e: ApiEndpoint) =>
  [
    e.ready ? "ready" : "not ready",
    ...e.serving && !e.ready ? ["serving"] : [],
    ...e.terminating ? ["terminating"] : [],
  ]
    .join(", ");

/** Returns how `report` (a node's) differs from the API's `view`. */
export function compareWithApi(report: ExplainReport, view: ApiView): ApiComparison {
  const differences: string[] = [];
  const key = (p: { family: string; name: string; protocol: string }) =>
    `${p.family} ${p.name}/${p.protocol}`;
  const held = new Map(report.ports.map((p) => [key(p), p]));
  for (const api of view.ports) {
    const node = held.get(key(api));
    held.delete(key(api));
    if (node === undefined) {
      differences.push(`lacks port ${portLabel(api)}`);
      continue;
    }
    const at = portLabel(api);
    if (node.port !== api.port) differences.push(`${at}: holds port ${node.port}`);
    if (node.clusterIP !== api.clusterIP) {
      differences.push(`${at}: holds cluster IP ${node.clusterIP}; the API: ${api.clusterIP}`);
    }
    if (node.nodePort !== api.nodePort) {
      differences.push(
        `${at}: holds node port ${node.nodePort ?? "none"}; the API: ${api.nodePort ?? "none"}`,
      );
    }
    const nodeEps = new Map(node.endpoints.map((e) => [e.endpoint, e]));
    for (const e of api.endpoints) {
      const n = nodeEps.get(e.endpoint);
      nodeEps.delete(e.endpoint);
      if (n === undefined) differences.push(`${at}: lacks endpoint ${e.endpoint} (${conditions(e)})`);
      else if (conditions(n) !== conditions(e)) {
        differences.push(`${at}: holds ${e.endpoint} ${conditions(n)}; the API: ${conditions(e)}`);
      }
    }
    for (const [ep, n] of nodeEps) {
      differences.push(`${at}: holds endpoint ${ep} (${conditions(n)}) the API removed`);
    }
  }
  for (const p of held.values()) differences.push(`holds port ${portLabel(p)} the API removed`);
  return { agrees: differences.length === 0, differences };
}
