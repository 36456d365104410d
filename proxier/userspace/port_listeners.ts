/**
 * The userspace mode's listeners: for each service port, one set of listening sockets per traffic
 * class (cluster IP portal; NodePort and external IPs; load-balancer IPs with their source ranges),
 * opened together, served by this thread or by the TCP workers, and closed together; with the portal
 * ports they hold and where a connection to one of them goes.
 * @module
 */
import type { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import type { ServicePortInfo } from "../model/types.ts";
import { servicePortNameString } from "../model/types.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Listener, ListenFn } from "../socket_proxy/listen.ts";
import type { TcpServing } from "../socket_proxy/tcp_serve.ts";
import type { UdpServing } from "../socket_proxy/udp_serve.ts";
import type { PortAllocator } from "./port_range.ts";
import type { WorkerPort } from "./tcp_worker_protocol.ts";
import { admits, type ClassPlan, type TrafficClass, trafficClasses } from "./traffic_classes.ts";

/** Where a connection to one of our listening addresses goes. */
export interface UserspaceRoute {
  /** The rotation's key: the service port key, with its traffic class but for internal traffic. */
  readonly service: string;
  /** The endpoints new connections are balanced over (`ip:port`), in rotation order. */
  readonly endpoints: readonly string[];
  /** Whom it serves (`loadBalancerSourceRanges`); absent: every client. */
  readonly admits?: (clientIP: string) => boolean;
}

/** One traffic class of a service port, as opened. */
export interface ClassPort {
  readonly plan: ClassPlan;
  /** The bound portal port, 0 without portal addresses. */
  readonly proxyPort: number;
  readonly listeners: Listener[];
  /** Served by the TCP workers on these addresses (then `listeners` is empty). */
  readonly workerListen?: WorkerPort["listen"];
}

/** One service port, as opened. */
export interface PortProxy {
  /**
   * Classes with no endpoint: their portal port is kept (and its portal rule), but nothing listens,
   * so the kernel refuses the connection (a reset; ICMP port-unreachable for a datagram), as the
   * kernel modes' REJECT does.
   */
  /** The fields that decide the listeners; a change reopens them. */
  readonly spec: string;
  readonly info: ServicePortInfo;
  /** Its traffic classes (`traffic_classes.ts`), each with its own listeners and rotation. */
  readonly classes: readonly ClassPort[];
}

/** The log field naming each class's portal port. */
const proxyPortField: Readonly<Record<TrafficClass, string>> = {
  internal: "proxyPort",
  external: "externalProxyPort",
  "load-balancer": "loadBalancerProxyPort",
};

/** What the listeners are opened with. */
export interface PortListenersOptions {
  /** Address the portal listeners bind (`--bind-address`). */
  readonly listenAddress: string;
  /** True when portal rules send cluster, external and load-balancer IPs to the portal ports. */
  readonly portals: boolean;
  /** True when TCP ports without ClientIP affinity are served by the TCP workers. */
  readonly workers: boolean;
  readonly allocator: PortAllocator;
  readonly listen: ListenFn;
  readonly balancer: RoundRobinBalancer;
  readonly tcp: TcpServing;
  readonly udp: UdpServing;
  readonly log: Logger;
}

/** The open service ports of one family's userspace proxier; see the module doc. */
export class PortListeners {
  readonly #o: PortListenersOptions;
  readonly #ports = new Map<string, PortProxy>();
  /** Where NodePorts listen, as of the sync in progress. */
  nodePortHosts: readonly string[] = [];
  /**
   * Where UDP listens, as of the sync in progress: each NodePort address on its own (a socket on
   * every address would answer from the address the kernel routes by, not the one asked), and the
   * portals on one address their rules DNAT to.
   */
  udpHosts: { readonly portal: string; readonly nodePorts: readonly string[] } = {
    portal: "",
    nodePorts: [],
  };

  /** Opens nothing until {@linkcode open}. */
  constructor(o: PortListenersOptions) {
    this.#o = o;
  }

  /** The open service port `key`, if any. */
  get(key: string): PortProxy | undefined {
    return this.#ports.get(key);
  }

  /** Every open service port, by key. */
  entries(): IterableIterator<[string, PortProxy]> {
    return this.#ports.entries();
  }

  /** Every open service port. */
  values(): IterableIterator<PortProxy> {
    return this.#ports.values();
  }

  /**
   * Returns the service port a connection to `hostname:port` reaches (a portal port on the listen
   * address, or a NodePort on one of the NodePort addresses) and its endpoints; undefined when
   * nothing of ours listens there.
   */
  route(protocol: "TCP" | "UDP" | "SCTP", hostname: string, port: number): UserspaceRoute | undefined {
    const bound = (addr: string) => addr === hostname || addr === "0.0.0.0" || addr === "::";
    const udp = protocol === "UDP";
    for (const p of this.#ports.values()) {
      if (p.info.protocol !== protocol) continue;
      for (const c of p.classes) {
        const portal = c.proxyPort !== 0 && c.proxyPort === port &&
          bound(udp ? this.udpHosts.portal : this.#o.listenAddress);
        const nodePort = c.plan.nodePort && p.info.nodePort === port &&
          (udp ? this.udpHosts.nodePorts : this.nodePortHosts).some(bound);
        if (portal || nodePort) return this.routeOf(c.plan);
      }
    }
    return undefined;
  }

  /** The route of one traffic class: its rotation, its endpoints, whom it admits. */
  routeOf(plan: ClassPlan): UserspaceRoute {
    return {
      service: plan.key,
      endpoints: this.#o.balancer.endpoints(plan.key),
      ...(plan.allow === undefined ? {} : { admits: (ip: string) => admits(plan, ip) }),
    };
  }

  /** Returns the portal port of a service port key's traffic class (default internal); 0 when none. */
  proxyPort(key: string, cls: TrafficClass = "internal"): number {
    return this.#ports.get(key)?.classes.find((c) => c.plan.cls === cls)?.proxyPort ?? 0;
  }

  /**
   * Opens every traffic class of service port `key` (its listeners here, or a probe of each address
   * for the TCP workers) and starts serving them; `spec` is what decided them. A class `refused`
   * (no endpoint) gets its portal port and no listener: the kernel refuses its connections.
   * @throws {Error} naming why a listener could not be opened (nothing of the port stays open).
   */
  open(
    key: string,
    info: ServicePortInfo,
    spec: string,
    refused: ReadonlySet<TrafficClass> = new Set(),
  ): void {
    const plans = trafficClasses(key, info, this.#o.portals);
    // ClientIP affinity needs one table for every connection of a client: those stay here.
    const workers = this.#o.workers && info.protocol === "TCP" && info.stickyMaxAgeSeconds === 0;
    const classes: ClassPort[] = [];
    try {
      for (const plan of plans) {
        classes.push(
          refused.has(plan.cls)
            ? this.#refusingClass(info, plan)
            : workers
            ? this.#probeClass(info, plan)
            : this.#openClass(info, plan),
        );
      }
    } catch (e) {
      for (const c of classes) this.#closeClass(c);
      throw e;
    }
    this.#ports.set(key, { spec, info, classes });
    for (const c of classes) {
      for (const l of c.listeners) {
        const admit = c.plan.allow === undefined ? undefined : (ip: string) => admits(c.plan, ip);
        if ("accept" in l) this.#o.tcp.serve(l, c.plan.key, () => this.#listening(key, l), admit);
        else this.#o.udp.serve(l, c.plan.key, () => this.#listening(key, l), admit);
      }
    }
    // Without portals a ClusterIP-only port has nothing to listen on here; nothing worth a line.
    if (classes.every((c) => c.listeners.length === 0 && (c.workerListen?.length ?? 0) === 0)) return;
    this.#o.log.info("Opened proxy port", {
      service: servicePortNameString(info.name),
      protocol: info.protocol,
      ...Object.fromEntries(
        classes.filter((c) => c.proxyPort !== 0).map((c) => [`${proxyPortField[c.plan.cls]}`, c.proxyPort]),
      ),
      ...(info.nodePort !== 0 ? { nodePort: info.nodePort } : {}),
    });
  }

  /** The addresses class `plan` listens on: its portal port (any free one: 0) and its NodePorts. */
  #classAddresses(
    info: ServicePortInfo,
    plan: ClassPlan,
    portal: number,
  ): Array<{ hostname: string; port: number }> {
    const udp = info.protocol === "UDP";
    const nodePorts = udp ? this.udpHosts.nodePorts : this.nodePortHosts;
    return [
      ...(plan.portalIPs.length > 0
        ? [{ hostname: udp ? this.udpHosts.portal : this.#o.listenAddress, port: portal }]
        : []),
      ...(plan.nodePort ? nodePorts.map((hostname) => ({ hostname, port: info.nodePort })) : []),
    ];
  }

  /**
   * A class without endpoints: a portal port (its rule stays) where nothing listens. Without
   * `--proxy-port-range` the kernel picks one: bound once to learn it, then closed.
   */
  #refusingClass(info: ServicePortInfo, plan: ClassPlan): ClassPort {
    if (plan.portalIPs.length === 0) return { plan, proxyPort: 0, listeners: [] };
    let portal = this.#o.allocator.allocate();
    if (portal === undefined) throw new Error("--proxy-port-range is exhausted");
    if (portal === 0) portal = this.#probe(info, this.#classAddresses(info, plan, 0)[0].hostname, 0);
    return { plan, proxyPort: portal, listeners: [] };
  }

  /** Opens class `plan`'s listeners on this thread. */
  #openClass(info: ServicePortInfo, plan: ClassPlan): ClassPort {
    const portal = plan.portalIPs.length > 0 ? this.#o.allocator.allocate() : 0;
    if (portal === undefined) throw new Error("--proxy-port-range is exhausted");
    const listeners: Listener[] = [];
    try {
      for (const a of this.#classAddresses(info, plan, portal)) {
        // Port 0 is the portal's alone (NodePorts are fixed): a port no other class holds.
        listeners.push(
          a.port === 0 ? this.#kernelPortal(info, a.hostname) : this.#listen(info, a.hostname, a.port),
        );
      }
    } catch (e) {
      for (const l of listeners) l.close();
      this.#releasePortal(plan, portal || (listeners[0]?.addr as Deno.NetAddr | undefined)?.port);
      throw e;
    }
    const proxyPort = plan.portalIPs.length > 0 ? (listeners[0].addr as Deno.NetAddr).port : 0;
    return { plan, proxyPort, listeners };
  }

  /**
   * Records a class the TCP workers serve. Each address is bound here once first (without
   * SO_REUSEPORT, then closed): that fails if anything else holds the port, where the workers'
   * shared binds could otherwise join another program's SO_REUSEPORT group, and it turns a portal's
   * "any port" into the one port every worker binds.
   */
  #probeClass(info: ServicePortInfo, plan: ClassPlan): ClassPort {
    const portal = plan.portalIPs.length > 0 ? this.#o.allocator.allocate() : 0;
    if (portal === undefined) throw new Error("--proxy-port-range is exhausted");
    const listen: Array<{ hostname: string; port: number }> = [];
    try {
      for (const a of this.#classAddresses(info, plan, portal)) {
        listen.push({ hostname: a.hostname, port: this.#probe(info, a.hostname, a.port) });
      }
    } catch (e) {
      this.#releasePortal(plan, portal || listen[0]?.port);
      throw e;
    }
    return {
      plan,
      proxyPort: plan.portalIPs.length > 0 ? listen[0].port : 0,
      listeners: [],
      workerListen: listen,
    };
  }

  /**
   * Binds a portal on `hostname` to a port the kernel picks that no class of ours holds, and claims
   * that port until the class closes. A probed portal is closed again before anything listens (the
   * TCP workers bind it later; a refusing portal, never), so without the claim the kernel could
   * hand the port to another Service, whose listeners would then get this one's connections.
   */
  #kernelPortal(info: ServicePortInfo, hostname: string): Listener {
    const met: Listener[] = [];
    try {
      // Each socket that met a held port stays bound meanwhile: the kernel cannot pick it again.
      for (let i = 0; i < 64; i++) {
        const l = this.#listen(info, hostname, 0);
        if (this.#o.allocator.claim((l.addr as Deno.NetAddr).port)) return l;
        met.push(l);
      }
      throw new Error(`no free portal port on ${hostname}: 64 the kernel picked are all held`);
    } finally {
      for (const l of met) l.close();
    }
  }

  /**
   * Gives back the portal port a class that failed to open took (from the range, or claimed from the
   * kernel: the first address's); `port` undefined: it took none.
   */
  #releasePortal(plan: ClassPlan, port: number | undefined): void {
    if (plan.portalIPs.length > 0 && port !== undefined) this.#o.allocator.release(port);
  }

  /** The port of a probe of `hostname:port` (a portal the kernel picks: claimed), closed again. */
  #probe(info: ServicePortInfo, hostname: string, port: number): number {
    const probe = port === 0 ? this.#kernelPortal(info, hostname) : this.#listen(info, hostname, port);
    probe.close();
    return (probe.addr as Deno.NetAddr).port;
  }

  /** Opens one listening socket for `info`'s protocol. */
  #listen(info: ServicePortInfo, hostname: string, port: number): Listener {
    if (info.protocol === "SCTP") throw new Error("SCTP is not supported in userspace mode");
    return this.#o.listen({ protocol: info.protocol, hostname, port });
  }

  /** Closes one class's listeners and forgets its rotation. */
  #closeClass(c: ClassPort): void {
    for (const l of c.listeners) {
      try {
        l.close();
      } catch { /* already closed */ }
    }
    if (c.proxyPort !== 0) this.#o.allocator.release(c.proxyPort);
    this.#o.balancer.remove(c.plan.key);
    this.#o.udp.dropSessionsNotIn(c.plan.key, new Set());
  }

  /** Closes service port `key`'s listeners (connections in flight keep going) and frees its portal ports. */
  close(key: string): void {
    const p = this.#ports.get(key);
    if (p === undefined) return;
    this.#ports.delete(key);
    for (const c of p.classes) this.#closeClass(c);
    if (p.classes.some((c) => c.listeners.length > 0 || (c.workerListen?.length ?? 0) > 0)) {
      this.#o.log.info("Closed proxy port", { service: servicePortNameString(p.info.name) });
    }
  }

  /** True while `l` is one of the listeners of `key`'s open port (we have not closed it). */
  #listening(key: string, l: Listener): boolean {
    return this.#ports.get(key)?.classes.some((c) => c.listeners.includes(l)) ?? false;
  }
}
