/**
 * The nftables proxier's side of its NodePorts on 127.0.0.1 / ::1, which no nftables rule can serve
 * and a socket proxy does (`socket_proxy/localhost_node_ports.ts`): after each sync the listeners
 * get each changed NodePort's endpoints as external traffic has them (everything on a full sync);
 * ports that could not be opened are tried again with backoff, doubling from 1 s to the sync period;
 * and `explain` asks here where the socket proxy sends a connection.
 * @module
 */
import type { SyncContext } from "../base_proxier.ts";
import type { Connection, DatapathAnswer } from "../family_view.ts";
import { isLoopback } from "../model/net.ts";
import type { Clock } from "../runtime/clock.ts";
import type { LocalhostNodePort, LocalhostNodePorts } from "../socket_proxy/localhost_node_ports.ts";
import { categorizeEndpoints, externalEndpoints, type NodeTopology } from "../model/topology.ts";
import { servicePortNameString } from "../model/types.ts";

/** Options of {@linkcode LocalhostFeed}. */
export interface LocalhostFeedOptions {
  readonly listeners: LocalhostNodePorts;
  readonly clock: Clock;
  /** The longest wait before ports that could not be opened are tried again. */
  readonly syncPeriodMs: number;
  /** Asks the proxier for a sync (the retry). */
  readonly sync: () => void;
}

/** Feeds one family's loopback listeners; see the module doc. */
export class LocalhostFeed {
  /** The listeners fed. */
  readonly listeners: LocalhostNodePorts;
  readonly #o: LocalhostFeedOptions;
  #retry?: { cancel: () => void; ms: number };

  /** Feeds nothing until the first {@linkcode feed}. */
  constructor(o: LocalhostFeedOptions) {
    this.#o = o;
    this.listeners = o.listeners;
  }

  /** Hands the listeners what `ctx` changed; schedules a retry while some port is unserved. */
  feed(
    ctx: Pick<SyncContext, "full" | "services" | "endpoints" | "changedPorts">,
    topology: NodeTopology,
  ): void {
    const keys = ctx.full ? ctx.services.keys() : ctx.changedPorts;
    const changes: Array<[string, LocalhostNodePort | undefined]> = [];
    for (const key of keys) {
      const svc = ctx.services.get(key);
      if (svc === undefined || svc.nodePort === 0) {
        if (!ctx.full) changes.push([key, undefined]);
        continue;
      }
      const cat = categorizeEndpoints(svc, ctx.endpoints.get(key) ?? [], topology);
      changes.push([key, {
        name: servicePortNameString(svc.name),
        protocol: svc.protocol,
        nodePort: svc.nodePort,
        endpoints: externalEndpoints(svc, cat).map((e) => e.key),
        stickyMaxAgeSeconds: svc.stickyMaxAgeSeconds,
      }]);
    }
    this.listeners.sync(changes, ctx.full);
    this.#retry?.cancel();
    if (this.listeners.unserved === 0) {
      this.#retry = undefined;
      return;
    }
    const ms = Math.min(this.#retry === undefined ? 1000 : 2 * this.#retry.ms, this.#o.syncPeriodMs);
    this.#retry = { ms, cancel: this.#o.clock.setTimer(this.#o.sync, ms) };
  }

  /**
   * Returns where the socket proxy sends `c` (`explain`): a NodePort on the loopback address from
   * this node; undefined for any other connection (the rules decide those).
   */
  answer(c: Connection): DatapathAnswer | undefined {
    const lo = this.listeners;
    if (c.fromNode !== true || !isLoopback(c.dst)) return undefined;
    const route = lo.route(c.protocol.toUpperCase() as "TCP" | "UDP" | "SCTP", c.port);
    return {
      verdict: route === undefined ? "REJECT" : "DNAT",
      endpoints: route === undefined ? [] : [...route.endpoints].sort(),
      masquerade: route === undefined ? undefined : true,
      rules: route === undefined
        ? []
        : [`listener ${lo.address}:${c.port}/${c.protocol} of ${route.service}`],
      by: "the loopback socket proxy",
      ...(route === undefined ? {} : { proxied: true }),
    };
  }

  /** Stops the retry and closes the listeners (connections in flight finish). */
  close(): void {
    this.#retry?.cancel();
    this.listeners.close();
  }
}
