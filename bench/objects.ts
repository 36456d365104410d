/**
 * The one object generator every benchmark uses: N ClusterIP Services of one TCP port, each with
 * one EndpointSlice of 10 ready endpoints.
 * @module
 */
import type { KubernetesObject, V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import type { TestApiServer } from "../tests/support/api_server.ts";
import type { EventHandler } from "../proxier/sources/handlers.ts";
import { requestURL, sourceQueries } from "../proxier/sources/api_client.ts";

const ip = (n: number, base: number) => `${base}.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
/** `prefix` followed by n as two groups of hex (`fd00:30::` and 70,000: `fd00:30::1:1170`). */
const ip6 = (prefix: string, n: number) => `${prefix}${(n >> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
import type { ProxyConfig } from "../proxier/options/config.ts";
import { defaultConfig } from "../proxier/options/kube_proxy_configuration.ts";

/**
 * The generator: service i has cluster IP 172.30.x.y and `endpoints` (10) endpoints in 10.0.0.0/8.
 * `dualStack`: each is dual-stack too, with a second cluster IP in fd00:30::/64 and a second slice of
 * as many endpoints in fd00:10::/64.
 */
export function generate(
  n: number,
  endpoints = 10,
  o: { dualStack?: boolean } = {},
): { services: V1Service[]; slices: V1EndpointSlice[] } {
  const services: V1Service[] = [];
  const slices: V1EndpointSlice[] = [];
  for (let i = 0; i < n; i++) {
    const name = `svc-${i}`;
    const clusterIP = `172.${30 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
    const clusterIPs = o.dualStack ? [clusterIP, ip6("fd00:30::", i)] : [clusterIP];
    services.push({
      metadata: { namespace: "bench", name },
      spec: {
        type: "ClusterIP",
        clusterIP,
        clusterIPs,
        ...(o.dualStack ? { ipFamilies: ["IPv4", "IPv6"], ipFamilyPolicy: "RequireDualStack" } : {}),
        ports: [{ name: "http", port: 80, protocol: "TCP" }],
      },
    });
    slices.push(slice(name, i, 0, endpoints));
    if (o.dualStack) slices.push(slice6(name, i, endpoints));
  }
  return { services, slices };
}

/** Service `name` (the i-th)'s IPv6 slice of `endpoints` endpoints in fd00:10::/64. */
function slice6(name: string, i: number, endpoints: number): V1EndpointSlice {
  const v4 = slice(name, i, 0, endpoints);
  return {
    ...v4,
    metadata: { ...v4.metadata, name: `${name}-v6` },
    addressType: "IPv6",
    endpoints: (v4.endpoints ?? []).map((e, k) => ({
      ...e,
      addresses: [`${ip6("fd00:10::", i)}:${k.toString(16)}`],
    })),
  };
}

/**
 * Service `name` (the i-th)'s slice of `endpoints` (10) endpoints in 10.0.0.0/8. Generation g > 0
 * replaces exactly one of them (the first) with an address in 11.0.0.0/8: a one-endpoint change.
 */
export function slice(name: string, i: number, generation: number, endpoints = 10): V1EndpointSlice {
  return {
    metadata: { namespace: "bench", name: `${name}-abc`, labels: { "kubernetes.io/service-name": name } },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: Array.from({ length: endpoints }, (_, k) => ({
      addresses: [k === 0 && generation > 0 ? ip(i + generation * 65536, 11) : ip(i * endpoints + k + 1, 10)],
      conditions: { ready: true },
      nodeName: "node-b",
    })),
  };
}

/** This process's peak resident memory (VmHWM), MiB. */
export function peakRssMiB(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(Deno.readTextFileSync("/proc/self/status"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Feeds N generated services to `p` with both "synced" calls; returns the milliseconds it took. */
export function feedGenerated(p: EventHandler, n: number, endpoints = 10): number {
  const { services, slices } = generate(n, endpoints);
  const t = performance.now();
  for (const s of services) p.onServiceAdd(s);
  for (const s of slices) p.onEndpointSliceAdd(s);
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  return performance.now() - t;
}

/**
 * Returns upstream's default configuration with `over`, on a file source: the benchmarks feed the
 * whole object set themselves, as the file source does, so the first sync does not wait for a Node.
 */
export function benchConfig(over: Partial<ProxyConfig> = {}): ProxyConfig {
  return { ...defaultConfig(), source: { kind: "file", path: "bench" }, ...over };
}

/**
 * Puts on `api` what a node's kube-proxy lists: its own Node (`node-a`, at 127.0.0.1: the first sync
 * waits for it, as upstream's does), `services` and `slices`. Returns `api`.
 */
export function serveObjects(
  api: TestApiServer,
  services: readonly V1Service[],
  slices: readonly V1EndpointSlice[],
): TestApiServer {
  api.apply("nodes", {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "node-a" },
    status: { addresses: [{ type: "InternalIP", address: "127.0.0.1" }] },
  } as KubernetesObject);
  for (const s of services) api.apply("services", { apiVersion: "v1", kind: "Service", ...s });
  for (const s of slices) {
    api.apply("endpointslices", { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s });
  }
  return api;
}

/**
 * Asks the test API server at `master` once for each list a start of the program on `nodeName`
 * reads, with the program's own queries: the server then answers the program from bodies already
 * encoded at this version, as a real API server from its watch cache, and a start shares the
 * node's cores with no list encoding (a real cluster's control plane does that on its own
 * machines; at 50,000 Services of one endpoint about a tenth of a CPU-second of each start, at 50,000 of
 * ten about a fifth).
 */
export async function encodeListsAhead(master: string, nodeName = "node-a"): Promise<void> {
  for (const { path, query } of Object.values(sourceQueries(nodeName))) {
    // The program's own URL: the server keeps what it encoded by path and query.
    const url = requestURL(master, path, query);
    const res = await fetch(url);
    if (!res.ok) throw new Error(`listing ${url} answered ${res.status}`);
    await res.arrayBuffer();
  }
}
