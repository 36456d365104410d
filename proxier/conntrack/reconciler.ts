/**
 * The conntrack reconciler, as upstream's (`pkg/proxy/conntrack`, 1.32+) for every kernel mode:
 * after each sync it lists the UDP (and SCTP) flows of the family and deletes those that would keep
 * a client on something no longer there: a flow to a service address or node port DNATed to an
 * endpoint that is not serving any more, a flow to a service address from before the service had
 * serving endpoints (it was rejected, not DNATed), and every flow to the addresses and node port of a
 * removed service port. Being a reconciliation, a missed event heals at the next sync.
 * @module
 */
import { Counter, exponentialBuckets, Histogram, type Registry } from "../runtime/prometheus.ts";
import type { Conntrack, FlowFilter, FlowProtocol } from "../../iptables/conntrack.ts";
import { IP_FAMILY_LABEL, registeredOnce } from "../metrics.ts";
import type { Logger } from "../runtime/logger.ts";
import type {
  EndpointInfo,
  EndpointsMap,
  IPFamily,
  ServicePortInfo,
  ServicePortMap,
} from "../model/types.ts";
import type { ToolNeed } from "../runtime/kernel_tools.ts";

/** The tool the reconciler runs; every mode that NATs in the kernel names it among its tools. */
export const CONNTRACK_NEED: ToolNeed = {
  tool: "conntrack",
  required: false,
  without: "stale UDP conntrack entries are not cleared: UDP clients keep reaching removed endpoints " +
    "(and REJECTed services) until their flows time out (Debian/Ubuntu package conntrack)",
};

/** What one reconciliation looks at. */
export interface ReconcileInput {
  readonly services: ServicePortMap;
  readonly endpoints: EndpointsMap;
  /** Service ports this sync removed: their flows go (unless another port now serves the address). */
  readonly removed: readonly ServicePortInfo[];
}

/** What one reconciliation did. */
export interface ReconcileResult {
  /** Flows deleted. */
  readonly deleted: number;
  /** Flows looked at (0 when no UDP or SCTP service port is involved: nothing was listed). */
  readonly flows: number;
}

const FLOW_PROTOCOLS: Readonly<Record<string, FlowProtocol>> = { UDP: "udp", SCTP: "sctp" };

/** Whether the reconciler reads `svc` (a UDP or SCTP port): it adds nothing for the others. */
export function reconciledPort(svc: ServicePortInfo): boolean {
  return FLOW_PROTOCOLS[svc.protocol] !== undefined;
}

/**
 * Adds the destinations of UDP or SCTP port `svc` (`proto addr port`, and `proto :nodePort`) to
 * `out`, each with the serving endpoints (`ip port`) flows to it may be DNATed to; other protocols
 * add nothing.
 */
function addDestinations(
  out: Map<string, Set<string>>,
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
): void {
  const proto = FLOW_PROTOCOLS[svc.protocol];
  if (proto === undefined) return;
  const serving = eps.filter((e) => e.serving).map((e) => `${e.ip} ${e.port}`);
  const add = (k: string) => {
    let to = out.get(k);
    if (to === undefined) out.set(k, to = new Set());
    for (const ep of serving) to.add(ep);
  };
  for (const addr of [svc.clusterIP, ...svc.externalIPs, ...svc.loadBalancerIPs]) {
    add(`${proto} ${addr} ${svc.port}`);
  }
  if (svc.nodePort !== 0) add(`${proto} :${svc.nodePort}`);
}

/**
 * Deletes the stale flows of `family` (see the module doc); returns how many it deleted and how
 * many it looked at. Nothing is listed when no UDP or SCTP service port exists or went away.
 */
export async function reconcileConntrack(
  ct: Conntrack,
  input: ReconcileInput,
): Promise<ReconcileResult> {
  // Every sync, over every service port: nothing is allocated for a TCP one.
  const live = new Map<string, Set<string>>();
  input.services.forEach((svc, key) => addDestinations(live, svc, input.endpoints.get(key) ?? []));
  const removed = new Map<string, Set<string>>();
  for (const svc of input.removed) addDestinations(removed, svc, []);
  const gone = new Set([...removed.keys()].filter((k) => !live.has(k)));
  const protocols = new Set([...live.keys(), ...gone].map((k) => k.split(" ")[0] as FlowProtocol));
  // An endpoint no live destination may reach: all its flows go with one deletion, whatever their
  // destination (a removed endpoint shows up behind the cluster IP, external IPs and node port).
  const servingAnywhere = new Set([...live.values()].flatMap((s) => [...s]));
  const filters = new Map<string, FlowFilter>();
  let deleted = 0;
  let flows = 0;
  for (const protocol of protocols) {
    for (const f of await ct.list(protocol)) {
      flows++;
      const dnatted = f.replySrc !== f.origDst || f.replySport !== f.origDport;
      const to = `${f.replySrc} ${f.replySport}`;
      const addrKey = `${protocol} ${f.origDst} ${f.origDport}`;
      const portKey = `${protocol} :${f.origDport}`;
      let stale: boolean;
      if (live.has(addrKey)) {
        const serving = live.get(addrKey)!;
        // Not DNATed: rejected while the service had no serving endpoint; it has one now.
        stale = dnatted ? !serving.has(to) : serving.size > 0;
      } else if (gone.has(addrKey)) stale = true;
      else if (dnatted && live.has(portKey)) stale = !live.get(portKey)!.has(to);
      else stale = dnatted && gone.has(portKey);
      if (!stale) continue;
      deleted++;
      const anyDst = dnatted && !servingAnywhere.has(to);
      const k = anyDst ? `${protocol} * ${to}` : `${protocol} ${f.origDst} ${f.origDport} ${to}`;
      if (!filters.has(k)) {
        filters.set(k, {
          protocol,
          ...(anyDst ? {} : { origDst: f.origDst, origDport: f.origDport }),
          replySrc: f.replySrc,
          replySport: f.replySport,
        });
      }
    }
  }
  await ct.delete([...filters.values()]);
  return { deleted, flows };
}

/** Upstream's reconciler metrics for `family`, registered once on `registry`. */
export function reconcilerMetrics(
  registry: Registry,
  family: IPFamily,
): { readonly duration: { observe(s: number): void }; readonly deleted: { inc(n: number): void } } {
  const labels = { [IP_FAMILY_LABEL]: family };
  const duration = registeredOnce(
    registry,
    "kubeproxy_conntrack_reconciler_sync_duration_seconds",
    () =>
      new Histogram({
        name: "kubeproxy_conntrack_reconciler_sync_duration_seconds",
        help: "ReconcileConntrackFlowsLatency latency in seconds",
        buckets: exponentialBuckets(0.001, 2, 15),
        labelNames: [IP_FAMILY_LABEL] as const,
        registers: [registry],
      }),
  ).labels(labels);
  const deleted = registeredOnce(
    registry,
    "kubeproxy_conntrack_reconciler_deleted_entries_total",
    () =>
      new Counter({
        name: "kubeproxy_conntrack_reconciler_deleted_entries_total",
        help: "Cumulative conntrack flows deleted by conntrack reconciler",
        labelNames: [IP_FAMILY_LABEL] as const,
        registers: [registry],
      }),
  ).labels(labels);
  return { duration, deleted };
}

/**
 * Reconciles one family's flows after each sync, as the shared post-sync step runs it: counted in
 * upstream's metrics, and never failing the sync (a leftover flow only delays its client until the
 * next sync or its expiry; the failure is logged).
 */
export class ConntrackReconciler {
  readonly #ct: Conntrack;
  readonly #family: IPFamily;
  readonly #log: Logger;
  readonly #metrics: ReturnType<typeof reconcilerMetrics>;

  /** Registers the metrics on `registry`; lists nothing until {@linkcode reconcile}. */
  constructor(o: { conntrack: Conntrack; registry: Registry; family: IPFamily; log: Logger }) {
    this.#ct = o.conntrack;
    this.#family = o.family;
    this.#log = o.log;
    this.#metrics = reconcilerMetrics(o.registry, o.family);
  }

  /** Deletes the stale flows of `input` (see {@linkcode reconcileConntrack}); never throws. */
  async reconcile(input: ReconcileInput): Promise<void> {
    const t0 = performance.now();
    try {
      const r = await reconcileConntrack(this.#ct, input);
      if (r.flows > 0) this.#metrics.duration.observe((performance.now() - t0) / 1000);
      if (r.deleted > 0) {
        this.#metrics.deleted.inc(r.deleted);
        this.#log.debug("Deleted stale conntrack flows", {
          family: this.#family,
          deleted: r.deleted,
          of: r.flows,
        });
      }
    } catch (e) {
      this.#log.warn("Conntrack reconcile failed; stale flows stay until the next sync", {
        family: this.#family,
        error: e instanceof Error ? e.message : String(e),
      });
    }
  }
}
