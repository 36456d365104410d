/**
 * The steps after every sync that read the service map: the conntrack reconciler (UDP and SCTP
 * ports), the health check node ports' servers (ports with one), the no-local-endpoints metric
 * (ports with a Local traffic policy). Each reads a few ports out of the whole map: the subsets are
 * kept up to date from each sync's changed ports, so the steps cost what the few hold, not what the
 * table holds (50,000 ports walked three times a sync were most of a one-endpoint change's cost).
 * @module
 */
import type { Conntrack } from "../../iptables/conntrack.ts";
import { ConntrackReconciler, reconciledPort } from "../conntrack/reconciler.ts";
import {
  type HealthCheckAddresses,
  type ServiceHealthServer,
  serviceHealthStates,
} from "../healthcheck/service_health.ts";
import type { FamilyMetrics } from "../metrics.ts";
import { countNoLocalEndpoints } from "../model/topology.ts";
import type { EndpointsMap, IPFamily, ServicePortInfo, ServicePortMap } from "../model/types.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Registry } from "../runtime/prometheus.ts";

/** The ports of a service map that `want` picks, in step with the map. */
export class PortSubset {
  readonly #want: (svc: ServicePortInfo) => boolean;
  readonly #ports: ServicePortMap = new Map();

  /** An empty subset of the ports `want` picks. */
  constructor(want: (svc: ServicePortInfo) => boolean) {
    this.#want = want;
  }

  /** The picked ports, keyed as in the service map. */
  get ports(): ServicePortMap {
    return this.#ports;
  }

  /** Takes in port `key` as the service map now holds it (`svc`; undefined: it went away). */
  update(key: string, svc: ServicePortInfo | undefined): void {
    if (svc !== undefined && this.#want(svc)) this.#ports.set(key, svc);
    else this.#ports.delete(key);
  }
}

/** Options of {@linkcode AfterSync}. */
export interface AfterSyncOptions {
  readonly family: IPFamily;
  readonly log: Logger;
  readonly registry: Registry;
  readonly metrics: FamilyMetrics;
  /** The conntrack table to reconcile (modes that NAT in the kernel); none: no reconciler. */
  readonly conntrack?: Conntrack;
  readonly healthServer?: ServiceHealthServer;
}

/** See the module doc. Construction starts nothing. */
export class AfterSync {
  readonly #o: AfterSyncOptions;
  readonly #reconciler?: ConntrackReconciler;
  readonly #reconciled = new PortSubset(reconciledPort);
  readonly #healthChecked = new PortSubset((svc) => svc.healthCheckNodePort !== 0);
  readonly #localPolicy = new PortSubset((svc) => svc.internalPolicyLocal || svc.externalPolicyLocal);

  /** Registers the reconciler's metrics when there is a conntrack table; runs nothing. */
  constructor(o: AfterSyncOptions) {
    this.#o = o;
    if (o.conntrack !== undefined) {
      this.#reconciler = new ConntrackReconciler({ ...o, conntrack: o.conntrack });
    }
  }

  /**
   * Takes in one sync's changed ports (every port of each changed Service, before and after: the
   * only ports whose info can have changed), also when the sync then fails.
   */
  changed(services: ServicePortMap, changed: Iterable<string>): void {
    for (const key of changed) {
      const svc = services.get(key);
      for (const s of [this.#reconciled, this.#healthChecked, this.#localPolicy]) s.update(key, svc);
    }
  }

  /**
   * After a successful sync: deletes stale flows (of `removed` ports too), updates the health check
   * servers (listening on `healthAddresses()`), and sets the no-local-endpoints metric.
   */
  async run(
    endpoints: EndpointsMap,
    removed: readonly ServicePortInfo[],
    healthAddresses: () => HealthCheckAddresses,
  ): Promise<void> {
    await this.#reconciler?.reconcile({ services: this.#reconciled.ports, endpoints, removed });
    const server = this.#o.healthServer;
    server?.sync(
      serviceHealthStates(this.#healthChecked.ports, endpoints),
      this.#o.family,
      healthAddresses(),
    );
    const noLocal = countNoLocalEndpoints(this.#localPolicy.ports, endpoints);
    this.#o.metrics.noLocalEndpoints(noLocal.internal, noLocal.external);
  }
}
