/**
 * The ipvs mode's own metrics: upstream's iptables-restore failure counters (its iptables rules),
 * and per-virtual-server IPVS traffic counters (kube-router exports these; upstream does not).
 * @module
 */
import { Counter, type Registry } from "../runtime/prometheus.ts";

/** One virtual server's IPVS counters with the Service it serves. */
export interface IpvsServiceCounters {
  readonly labels: {
    readonly namespace: string;
    readonly service: string;
    readonly port: string;
    readonly protocol: string;
    readonly address: string;
  };
  readonly counters: {
    readonly connections: number;
    readonly packetsIn: number;
    readonly packetsOut: number;
    readonly bytesIn: number;
    readonly bytesOut: number;
  };
}

/** Per registry: the proxiers' counter sources, read on every scrape. */
const SOURCES = new WeakMap<Registry, Array<() => Promise<readonly IpvsServiceCounters[]>>>();

/**
 * Adds a source of per-virtual-server IPVS counters (each family's ipvs proxier) to `registry`,
 * registering the five counters the first time.
 */
export function addIpvsCounters(
  registry: Registry,
  source: () => Promise<readonly IpvsServiceCounters[]>,
): void {
  let sources = SOURCES.get(registry);
  if (sources === undefined) {
    SOURCES.set(registry, sources = []);
    registerIpvsCounters(registry, sources);
  }
  sources.push(source);
}

function registerIpvsCounters(
  registry: Registry,
  sources: Array<() => Promise<readonly IpvsServiceCounters[]>>,
): void {
  const labelNames = ["namespace", "service", "port", "protocol", "address"] as const;
  const registers = [registry];
  const fields = [
    [
      "connections",
      "kubeproxy_ipvs_service_connections_total",
      "Connections IPVS scheduled to the virtual server",
    ],
    ["packetsIn", "kubeproxy_ipvs_service_packets_in_total", "Packets into the virtual server"],
    ["packetsOut", "kubeproxy_ipvs_service_packets_out_total", "Packets out of the virtual server"],
    ["bytesIn", "kubeproxy_ipvs_service_bytes_in_total", "Bytes into the virtual server"],
    ["bytesOut", "kubeproxy_ipvs_service_bytes_out_total", "Bytes out of the virtual server"],
  ] as const;
  // One kernel read per scrape fills all five: the counters' collects, started together, share it.
  let pending: Promise<void> | undefined;
  const fill = async () => {
    const rows = (await Promise.all(sources.map((s) => s().catch(() => [])))).flat();
    for (const c of counters) c.reset();
    for (const r of rows) fields.forEach(([field], i) => counters[i].inc(r.labels, r.counters[field]));
  };
  const collect = () => {
    if (pending === undefined) {
      pending = fill();
      pending.then(() => pending = undefined, () => pending = undefined);
    }
    return pending;
  };
  const counters: Array<Counter<typeof labelNames[number]>> = fields.map(([, name, help]) =>
    new Counter({ name, help, labelNames, registers, collect })
  );
}
