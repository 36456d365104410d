/**
 * The userspace mode: a TCP/UDP proxy per service port, reached through NodePort listeners and
 * iptables REDIRECT "portals" for cluster, external and load-balancer IPs.
 * @module
 */
import type { IPTables } from "../../iptables/iptables.ts";
import { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import type { PortRange } from "../options/config.ts";
import { PortAllocator } from "./port_range.ts";
import { BaseProxier, type SyncContext } from "../base_proxier.ts";
import type { BaseProxierOptions } from "../proxier_options.ts";
import type { Connection, DatapathAnswer, FamilyView } from "../family_view.ts";
import { ensurePortalJumps, portalRules } from "./portals.ts";
import type { SpliceLimits } from "../socket_proxy/tcp_copy.ts";
import { type ServingEvents, TcpServing } from "../socket_proxy/tcp_serve.ts";
import { TcpWorkerPool } from "./tcp_workers.ts";
import type { WorkerPort } from "./tcp_worker_protocol.ts";
import { UdpServing } from "../socket_proxy/udp_serve.ts";
import { DialWarnings } from "../socket_proxy/dial_warnings.ts";
import { denoListen, type Listener, type ListenFn } from "../socket_proxy/listen.ts";
import { type UserspaceMetrics, userspaceMetrics } from "./metrics.ts";
import { categorizeEndpoints } from "../topology.ts";
import {
  admits,
  classEndpoints,
  type ClassPlan,
  type TrafficClass,
  trafficClasses,
} from "./traffic_classes.ts";
import type { ServicePortInfo } from "../types.ts";
import { servicePortNameString } from "../types.ts";

/** Options of {@linkcode UserspaceProxier}. */
export interface UserspaceProxierOptions extends BaseProxierOptions {
  /** iptables for portal rules; undefined serves NodePorts only. */
  readonly iptables?: IPTables;
  /** Without `iptables`: why there are none (`--userspace-portals=false`, not root...), as said once. */
  readonly noPortals?: string;
  /** Address the portal listeners bind (`--bind-address`). */
  readonly listenAddress: string;
  /**
   * `--nodeport-addresses` as configured (`proxier/nodeport_addresses.ts` reads it; loopback
   * addresses included, as a socket serves them): NodePorts listen on every address (`0.0.0.0`) or
   * on those of `nodeIPs` inside it.
   */
  readonly portRange: PortRange;
  readonly udpIdleTimeoutMs: number;
  /** TCP idle and stalled-write bounds (`--tcp-idle-timeout`, `--tcp-write-timeout`); default none. */
  readonly tcpLimits?: SpliceLimits;
  /** For reproducible shuffles in tests. */
  readonly random?: () => number;
  /** Opens a listening socket; defaults to `Deno.listen` / `Deno.listenDatagram`. */
  readonly listen?: ListenFn;
  /**
   * TCP workers (`--userspace-tcp-workers`): 0 or undefined serves TCP on this thread; N serves
   * TCP ports without ClientIP affinity from N workers sharing each port (see `tcp_worker.ts`).
   */
  readonly tcpWorkers?: number;
}

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
interface ClassPort {
  readonly plan: ClassPlan;
  /** The bound portal port, 0 without portal addresses. */
  readonly proxyPort: number;
  readonly listeners: Listener[];
  /** Served by the TCP workers on these addresses (then `listeners` is empty). */
  readonly workerListen?: WorkerPort["listen"];
}

interface PortProxy {
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

/** The service port key of a rotation's key (`ns/name:port|external` -> `ns/name:port`). */
function serviceKeyOf(classKey: string): string {
  const bar = classKey.indexOf("|");
  return bar < 0 ? classKey : classKey.slice(0, bar);
}

/** Proxies in userspace; see the module doc. */
export class UserspaceProxier extends BaseProxier {
  readonly #iptables?: IPTables;
  readonly #listenAddress: string;
  readonly #o: UserspaceProxierOptions;
  readonly #metrics: UserspaceMetrics;
  /** Where NodePorts listen, as of the sync in progress. */
  #nodePortHosts: readonly string[] = [];
  readonly #ports = new Map<string, PortProxy>();
  readonly #allocator: PortAllocator;
  readonly #limits?: SpliceLimits;
  readonly #balancer: RoundRobinBalancer;
  readonly #udp: UdpServing;
  readonly #events: ServingEvents;
  readonly #tcp: TcpServing;
  readonly #pool?: TcpWorkerPool;
  readonly #listenFn: ListenFn;
  #portalText = "";
  #warnedNoPortals = false;
  readonly #warnedSctp = new Set<string>();
  /** Service ports whose port cannot be opened now, with the reason last reported. */
  readonly #unserved = new Map<string, string>();
  /** A retry of the unserved ports is scheduled (backoff doubling from 1 s to the sync period). */
  #retry?: { cancel: () => void; ms: number };
  readonly #dialWarnings: DialWarnings;

  /** Builds the proxier; opens nothing until the first sync. */
  constructor(o: UserspaceProxierOptions) {
    super(o);
    this.#o = o;
    this.#metrics = userspaceMetrics(this.registry);
    this.#iptables = o.iptables;
    this.#listenAddress = o.listenAddress;
    this.#allocator = new PortAllocator(o.portRange);
    this.#limits = o.tcpLimits;
    this.#balancer = new RoundRobinBalancer({ clock: o.clock, random: o.random });
    this.#listenFn = o.listen ?? denoListen;
    this.#dialWarnings = new DialWarnings(o);
    this.#events = {
      dialFailed: (key, endpoint, error) => {
        this.#metrics.dialFailure(serviceKeyOf(key));
        this.#dialWarnings.failed(serviceKeyOf(key), endpoint, error);
      },
      refused: (key) => this.#metrics.sourceRangeRefused(serviceKeyOf(key)),
      acceptFailed: (key, error, first) => {
        this.#metrics.acceptError();
        if (first) {
          this.log.warn("Accepting on a proxy port failed; retrying (too many open files?)", {
            service: serviceKeyOf(key),
            error,
          });
        }
      },
      acceptRecovered: (key, failures) =>
        this.log.info("Accepting on the proxy port again", { service: serviceKeyOf(key), failures }),
    };
    this.#tcp = new TcpServing({ balancer: this.#balancer, limits: this.#limits, events: this.#events });
    this.#udp = new UdpServing({
      balancer: this.#balancer,
      events: this.#events,
      clock: o.clock,
      log: o.log,
      family: o.family,
      idleTimeoutMs: o.udpIdleTimeoutMs,
    });
    if ((o.tcpWorkers ?? 0) > 0) this.#pool = new TcpWorkerPool(o.tcpWorkers!, this.#events);
  }

  /**
   * Returns the service port a connection to `hostname:port` reaches (a portal port on the listen
   * address, or a NodePort on one of the NodePort addresses) and its endpoints; undefined when
   * nothing of ours listens there.
   */
  route(protocol: "TCP" | "UDP" | "SCTP", hostname: string, port: number): UserspaceRoute | undefined {
    const bound = (addr: string) => addr === hostname || addr === "0.0.0.0" || addr === "::";
    for (const p of this.#ports.values()) {
      if (p.info.protocol !== protocol) continue;
      for (const c of p.classes) {
        const portal = c.proxyPort !== 0 && c.proxyPort === port && bound(this.#listenAddress);
        const nodePort = c.plan.nodePort && p.info.nodePort === port && this.#nodePortHosts.some(bound);
        if (portal || nodePort) return this.#routeOf(c.plan);
      }
    }
    return undefined;
  }

  #routeOf(plan: ClassPlan): UserspaceRoute {
    return {
      service: plan.key,
      endpoints: this.#balancer.endpoints(plan.key),
      ...(plan.allow === undefined ? {} : { admits: (ip: string) => admits(plan, ip) }),
    };
  }

  /**
   * Returns the endpoint a new connection from `clientIP` to the service port `key` gets, as a
   * real connection would (round robin, ClientIP affinity); undefined without endpoints.
   */
  pick(key: string, clientIP: string): string | undefined {
    return this.#balancer.next(key, clientIP);
  }

  /** Returns the portal port of a service port key's traffic class (default internal); 0 when none. */
  proxyPort(key: string, cls: TrafficClass = "internal"): number {
    return this.#ports.get(key)?.classes.find((c) => c.plan.cls === cls)?.proxyPort ?? 0;
  }

  /** @inheritdoc */
  protected override explainExtras(): Partial<FamilyView> {
    return {
      loopbackNodePorts: this.node.nodePortAddresses(true).allowLocalhost ? "listener" : "none",
      servesServiceIPs: this.#iptables !== undefined,
    };
  }

  /** What `explain` reads: this family's view, and where the listeners send a connection. */
  readonly explain = {
    views: () => [this.explainView()],
    answer: (c: Connection) => this.#answer(c),
  };

  /** Where a connection goes: a NodePort listener, or a portal rule's proxy port. */
  #answer(c: Connection): DatapathAnswer {
    const by = "the userspace proxy's listeners";
    const protocol = c.protocol.toUpperCase() as "TCP" | "UDP" | "SCTP";
    let route = this.route(protocol, c.dst, c.port);
    let rule = `listener ${c.dst}:${c.port}/${protocol}`;
    if (route === undefined && this.#iptables !== undefined) {
      for (const p of this.#ports.values()) {
        if (p.info.protocol !== protocol || p.info.port !== c.port) continue;
        const cls = p.classes.find((x) => x.proxyPort !== 0 && x.plan.portalIPs.includes(c.dst));
        if (cls === undefined) continue;
        route = this.#routeOf(cls.plan);
        rule = `portal ${c.dst}:${c.port}/${protocol} -> ${this.#listenAddress}:${cls.proxyPort}`;
        break;
      }
    }
    if (route === undefined) return { verdict: "none", endpoints: [], rules: [], by };
    if (route.admits !== undefined && !route.admits(c.src)) {
      return {
        verdict: protocol === "UDP" ? "DROP" : "REJECT",
        endpoints: [],
        rules: [rule, `the source ${c.src} is outside loadBalancerSourceRanges: closed at once`],
        by,
      };
    }
    if (route.endpoints.length === 0) {
      return { verdict: protocol === "UDP" ? "DROP" : "REJECT", endpoints: [], rules: [rule], by };
    }
    return { verdict: "DNAT", endpoints: [...route.endpoints].sort(), rules: [rule], by };
  }

  /** @inheritdoc */
  get onStop(): string {
    const portals = this.#iptables === undefined ? "" : "; portal rules stay";
    return `closing the proxy ports (connections in flight finish${portals})`;
  }

  /** Closes every listener (connections in flight keep going); the kernel rules stay. */
  close(): void {
    this.#retry?.cancel();
    for (const key of [...this.#ports.keys()]) this.#closePort(key);
    this.#tcp.close();
    this.#pool?.close();
  }

  /** @inheritdoc */
  protected override async syncRules(ctx: SyncContext): Promise<void> {
    if (this.#iptables === undefined && !this.#warnedNoPortals) {
      this.#warnedNoPortals = true;
      this.log.warn("No portal rules: only NodePorts are served", {
        reason: this.#o.noPortals ?? "no iptables",
      });
    }
    for (const key of [...this.#ports.keys()]) {
      if (!ctx.services.has(key)) this.#closePort(key);
    }
    const npa = this.node.nodePortAddresses(true);
    this.#nodePortHosts = npa.matchAll ? ["0.0.0.0"] : npa.nodeIPs(this.node.ips);
    const unopened = new Map<string, string>();
    const workerPorts: Array<Omit<WorkerPort, "slot">> = [];
    for (const [key, info] of ctx.services) {
      const spec = JSON.stringify([
        info.protocol,
        info.clusterIP,
        info.port,
        info.nodePort,
        info.nodePort === 0 ? [] : this.#nodePortHosts,
        info.externalIPs,
        info.loadBalancerIPs,
        info.hasSourceRanges ? info.loadBalancerSourceRanges : null,
      ]);
      const cur = this.#ports.get(key);
      if (info.protocol === "SCTP") {
        // Not a failure to retry: this mode cannot proxy SCTP at all (said once per service port).
        if (!this.#warnedSctp.has(key)) {
          this.#warnedSctp.add(key);
          this.log.warn("SCTP is not supported in userspace mode; not served", { service: key });
        }
        continue;
      }
      if (cur?.spec !== spec) {
        if (cur !== undefined) this.#closePort(key);
        try {
          this.#openPort(key, info, spec);
        } catch (e) {
          unopened.set(key, (e as Error).message);
        }
      }
      // Each traffic class balances over the endpoints its policy chooses (`traffic_classes.ts`).
      const cat = categorizeEndpoints(info, ctx.endpoints.get(key) ?? [], this.node.topology, this.log);
      for (const c of this.#ports.get(key)?.classes ?? []) {
        const eps = classEndpoints(c.plan.cls, info, cat).map((e) => e.key);
        this.#balancer.update(c.plan.key, eps, info.stickyMaxAgeSeconds);
        this.#udp.dropSessionsNotIn(c.plan.key, new Set(eps));
        // The order this thread shuffled, so every worker rotates over the same one.
        if (c.workerListen !== undefined) {
          workerPorts.push({
            key: c.plan.key,
            listen: c.workerListen,
            endpoints: this.#balancer.endpoints(c.plan.key),
            ...(c.plan.allow === undefined ? {} : { allow: c.plan.allow }),
          });
        }
      }
    }
    if (this.#pool !== undefined) {
      const failed = await this.#pool.sync(workerPorts, this.#limits);
      for (const { key: classKey } of workerPorts) {
        const error = failed.get(classKey) ?? failed.get("*");
        const key = serviceKeyOf(classKey);
        if (error === undefined || unopened.has(key)) continue;
        unopened.set(key, error);
        this.#closePort(key);
      }
    }
    if (this.#iptables !== undefined) await this.#syncPortals(ctx.full);
    this.#reportUnserved(unopened, ctx);
  }

  /**
   * A port another program holds concerns its Service, not the node: the sync succeeds (health
   * stays about syncs), the Service is named in a warning once per reason, counted in
   * `kubeproxy_userspace_unserved_service_ports`, and its port retried with backoff.
   */
  #reportUnserved(unopened: ReadonlyMap<string, string>, ctx: SyncContext): void {
    for (const [key, error] of unopened) {
      if (this.#unserved.get(key) === error) continue;
      const info = ctx.services.get(key)!;
      this.events.record({
        regarding: { kind: "Service", namespace: info.name.namespace, name: info.name.name },
        type: "Warning",
        reason: "FailedToStartServiceProxyPort",
        action: "Listen",
        note: `node ${this.nodeName} cannot serve ${servicePortNameString(info.name)}${
          info.nodePort !== 0 ? ` on node port ${info.nodePort}` : ""
        }: ${error}`,
      });
      this.log.warn(
        "Cannot open the proxy port of this Service; it is not served until the port is free, other Services are",
        {
          service: servicePortNameString(info.name),
          ...(info.nodePort !== 0 ? { nodePort: info.nodePort } : {}),
          error,
        },
      );
    }
    for (const key of this.#unserved.keys()) {
      if (!unopened.has(key) && this.#ports.has(key)) {
        this.log.info("Serving the Service's port now", { service: key });
      }
    }
    this.#unserved.clear();
    for (const [k, v] of unopened) this.#unserved.set(k, v);
    this.#metrics.unservedPorts(unopened.size);
    if (unopened.size === 0) {
      this.#retry?.cancel();
      this.#retry = undefined;
      return;
    }
    const ms = Math.min(this.#retry === undefined ? 1000 : 2 * this.#retry.ms, this.syncPeriodMs);
    this.#retry?.cancel();
    this.#retry = { ms, cancel: this.clock.setTimer(() => this.sync(), ms) };
  }

  #openPort(key: string, info: ServicePortInfo, spec: string): void {
    const plans = trafficClasses(key, info, this.#iptables !== undefined);
    // ClientIP affinity needs one table for every connection of a client: those stay here.
    const workers = this.#pool !== undefined && info.protocol === "TCP" && info.stickyMaxAgeSeconds === 0;
    const classes: ClassPort[] = [];
    try {
      for (const plan of plans) {
        classes.push(workers ? this.#probeClass(info, plan) : this.#openClass(info, plan));
      }
    } catch (e) {
      for (const c of classes) this.#closeClass(c);
      throw e;
    }
    this.#ports.set(key, { spec, info, classes });
    for (const c of classes) {
      for (const l of c.listeners) {
        const admit = c.plan.allow === undefined ? undefined : (ip: string) => admits(c.plan, ip);
        if ("accept" in l) this.#tcp.serve(l, c.plan.key, () => this.#listening(key, l), admit);
        else this.#udp.serve(l, c.plan.key, () => this.#listening(key, l), admit);
      }
    }
    // Without portals a ClusterIP-only port has nothing to listen on here; nothing worth a line.
    if (classes.every((c) => c.listeners.length === 0 && (c.workerListen?.length ?? 0) === 0)) return;
    this.log.info("Opened proxy port", {
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
    return [
      ...(plan.portalIPs.length > 0 ? [{ hostname: this.#listenAddress, port: portal }] : []),
      ...(plan.nodePort ? this.#nodePortHosts.map((hostname) => ({ hostname, port: info.nodePort })) : []),
    ];
  }

  /** Opens class `plan`'s listeners on this thread. */
  #openClass(info: ServicePortInfo, plan: ClassPlan): ClassPort {
    const portal = plan.portalIPs.length > 0 ? this.#allocator.allocate() : 0;
    if (portal === undefined) throw new Error("--proxy-port-range is exhausted");
    const listeners: Listener[] = [];
    try {
      for (const a of this.#classAddresses(info, plan, portal)) {
        listeners.push(this.#listen(info, a.hostname, a.port));
      }
    } catch (e) {
      for (const l of listeners) l.close();
      if (portal !== 0) this.#allocator.release(portal);
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
    const portal = plan.portalIPs.length > 0 ? this.#allocator.allocate() : 0;
    if (portal === undefined) throw new Error("--proxy-port-range is exhausted");
    const listen: Array<{ hostname: string; port: number }> = [];
    try {
      for (const a of this.#classAddresses(info, plan, portal)) {
        const probe = this.#listen(info, a.hostname, a.port);
        listen.push({ hostname: a.hostname, port: (probe.addr as Deno.NetAddr).port });
        probe.close();
      }
    } catch (e) {
      if (portal !== 0) this.#allocator.release(portal);
      throw e;
    }
    return {
      plan,
      proxyPort: plan.portalIPs.length > 0 ? listen[0].port : 0,
      listeners: [],
      workerListen: listen,
    };
  }

  #listen(info: ServicePortInfo, hostname: string, port: number): Listener {
    if (info.protocol === "SCTP") throw new Error("SCTP is not supported in userspace mode");
    return this.#listenFn({ protocol: info.protocol, hostname, port });
  }

  #closeClass(c: ClassPort): void {
    for (const l of c.listeners) {
      try {
        l.close();
      } catch { /* already closed */ }
    }
    if (c.proxyPort !== 0) this.#allocator.release(c.proxyPort);
    this.#balancer.remove(c.plan.key);
    this.#udp.dropSessionsNotIn(c.plan.key, new Set());
  }

  #closePort(key: string): void {
    const p = this.#ports.get(key);
    if (p === undefined) return;
    this.#ports.delete(key);
    for (const c of p.classes) this.#closeClass(c);
    if (p.classes.some((c) => c.listeners.length > 0 || (c.workerListen?.length ?? 0) > 0)) {
      this.log.info("Closed proxy port", { service: servicePortNameString(p.info.name) });
    }
  }

  /** True while `l` is one of the listeners of `key`'s open port (we have not closed it). */
  #listening(key: string, l: Listener): boolean {
    return this.#ports.get(key)?.classes.some((c) => c.listeners.includes(l)) ?? false;
  }

  async #syncPortals(full: boolean): Promise<void> {
    const ipt = this.#iptables!;
    if (full) await ensurePortalJumps(ipt);
    const text = portalRules(
      [...this.#ports.values()].flatMap((p) => p.classes.map((c) => ({ info: p.info, ...c }))),
    );
    if (!full && text === this.#portalText) return;
    await ipt.restoreAll(text, { flush: false, counters: false });
    this.#portalText = text;
  }
}
