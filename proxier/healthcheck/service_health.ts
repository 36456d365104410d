/**
 * Health check node ports of externalTrafficPolicy=Local LoadBalancer Services: an HTTP server per
 * port answering 200 when this node has local endpoints for the Service, 503 otherwise, with
 * upstream's JSON body, so load balancers send traffic only to nodes that can serve it.
 * @module
 */
import { type EventRecorder, nullRecorder } from "../runtime/events.ts";
import type { Logger } from "../runtime/logger.ts";
import type { EndpointsMap, ServicePortMap } from "../model/types.ts";

/** What one health check port reports. */
export interface ServiceHealth {
  readonly namespace: string;
  readonly name: string;
  readonly port: number;
  readonly localEndpoints: number;
}

/**
 * Returns what each health check node port reports, as upstream's `LocalReadyEndpoints`: per
 * Service, the distinct addresses of its endpoints that run on this node and are ready, over all
 * its ports. Terminating endpoints do not count, even while serving: a node left with only those
 * answers 503, so load balancers drain it before the pods go. Two Services sharing a port is a
 * misconfiguration; the port stays healthy while either can serve.
 */
export function serviceHealthStates(services: ServicePortMap, endpoints: EndpointsMap): ServiceHealth[] {
  const ready = new Map<string, Set<string>>();
  const byPort = new Map<number, ServiceHealth>();
  // forEach: every sync walks every port, and a for-of over entries allocates a pair per port.
  services.forEach((svc, key) => {
    if (svc.healthCheckNodePort === 0) return;
    let ips = ready.get(svc.service);
    if (ips === undefined) ready.set(svc.service, ips = new Set());
    for (const e of endpoints.get(key) ?? []) if (e.isLocal && e.ready) ips.add(e.ip);
  });
  for (const svc of services.values()) {
    if (svc.healthCheckNodePort === 0) continue;
    const local = ready.get(svc.service)!.size;
    const cur = byPort.get(svc.healthCheckNodePort);
    if (cur === undefined || local > cur.localEndpoints) {
      byPort.set(svc.healthCheckNodePort, {
        namespace: svc.name.namespace,
        name: svc.name.name,
        port: svc.healthCheckNodePort,
        localEndpoints: local,
      });
    }
  }
  return [...byPort.values()];
}

/**
 * Where one family's health check node ports listen: `all` (every address; `--nodeport-addresses`
 * unset or covering everything), or the node's addresses inside `--nodeport-addresses`.
 */
export type HealthCheckAddresses = "all" | readonly string[];

/**
 * Runs one server per health check node port and address, where NodePorts answer; {@linkcode sync}
 * opens and closes them.
 */
export class ServiceHealthServer {
  readonly #log: Logger;
  readonly #proxyHealthy: () => boolean;
  readonly #events: EventRecorder;
  readonly #nodeName: string;
  /** What each family's proxier last reported. */
  readonly #byFamily = new Map<
    string,
    { services: readonly ServiceHealth[]; addresses: HealthCheckAddresses }
  >();
  /** Per `address port`. */
  readonly #servers = new Map<string, { ac: AbortController; state: ServiceHealth }>();

  /**
   * Opens nothing until a sync. `proxyHealthy` is the proxy's own health (upstream's
   * `serviceProxyHealthy`): a stuck proxy answers 503 on every port, so load balancers stop sending
   * to it. Default: always healthy.
   */
  constructor(
    opts: {
      log: Logger;
      proxyHealthy?: () => boolean;
      events?: EventRecorder;
      nodeName?: string;
    },
  ) {
    this.#log = opts.log;
    this.#proxyHealthy = opts.proxyHealthy ?? (() => true);
    this.#events = opts.events ?? nullRecorder;
    this.#nodeName = opts.nodeName ?? "";
  }

  /**
   * Makes the running servers match `services` as `family`'s proxier sees them, on `addresses`,
   * together with what the other family's proxier last reported (a dual-stack Service's port is
   * served while either family has it, with the larger local endpoint count); a port that cannot be
   * bound is logged and posted as an Event. Every address of a family (`all`) is `0.0.0.0` for IPv4,
   * as upstream's all-address listener; the IPv6 all-address listener would take the port from it.
   */
  sync(services: readonly ServiceHealth[], family = "IPv4", addresses: HealthCheckAddresses = "all"): void {
    this.#byFamily.set(family, { services, addresses });
    const want = new Map<number, ServiceHealth>();
    const hosts = new Set<string>();
    for (const [f, report] of this.#byFamily) {
      for (const s of report.services) {
        const cur = want.get(s.port);
        if (cur === undefined || s.localEndpoints > cur.localEndpoints) want.set(s.port, s);
      }
      if (report.addresses !== "all") { for (const a of report.addresses) hosts.add(a); }
      else if (f === "IPv4") hosts.add("0.0.0.0");
    }
    const wanted = new Map<string, { hostname: string; state: ServiceHealth }>();
    for (const [port, state] of want) {
      for (const hostname of hosts) wanted.set(`${hostname} ${port}`, { hostname, state });
    }
    for (const [key, s] of this.#servers) {
      if (!wanted.has(key)) {
        s.ac.abort();
        this.#servers.delete(key);
      }
    }
    for (const [key, { hostname, state }] of wanted) {
      const cur = this.#servers.get(key);
      if (cur !== undefined) {
        cur.state = state;
        continue;
      }
      const entry = { ac: new AbortController(), state };
      try {
        this.#serve(entry, hostname, state.port);
        this.#servers.set(key, entry);
      } catch (e) {
        this.#log.error("Cannot open health check node port", {
          service: `${state.namespace}/${state.name}`,
          address: hostname,
          port: state.port,
          error: (e as Error).message,
        });
        this.#events.record({
          regarding: { kind: "Service", namespace: state.namespace, name: state.name },
          type: "Warning",
          reason: "FailedToStartServiceHealthcheck",
          action: "Listen",
          note:
            `node ${this.#nodeName} failed to start healthcheck "${state.namespace}/${state.name}" on port ${state.port}: ${
              (e as Error).message
            }`,
        });
      }
    }
  }

  /** Answers `entry`'s current state on `hostname:port` until its controller aborts. */
  #serve(entry: { ac: AbortController; state: ServiceHealth }, hostname: string, port: number): void {
    Deno.serve({ hostname, port, signal: entry.ac.signal, onListen() {} }, () => {
      const s = entry.state;
      const proxyHealthy = this.#proxyHealthy();
      return Response.json(
        {
          service: { namespace: s.namespace, name: s.name },
          localEndpoints: s.localEndpoints,
          serviceProxyHealthy: proxyHealthy,
        },
        {
          status: s.localEndpoints > 0 && proxyHealthy ? 200 : 503,
          headers: {
            "X-Content-Type-Options": "nosniff",
            "X-Load-Balancing-Endpoint-Weight": String(s.localEndpoints),
          },
        },
      );
    });
  }

  /** Closes every server. */
  close(): void {
    for (const s of this.#servers.values()) s.ac.abort();
    this.#servers.clear();
  }
}
