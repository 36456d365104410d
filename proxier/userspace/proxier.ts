/**
 * The userspace mode: a TCP/UDP proxy per service port, reached through NodePort listeners and
 * iptables REDIRECT "portals" for cluster, external and load-balancer IPs.
 * @module
 */
import { unservedCondition } from "./unserved.ts";
import { udpNodePortHosts, udpPortalAddress } from "./udp_hosts.ts";
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
import { PortListeners, type UserspaceRoute } from "./port_listeners.ts";
import { UdpServing } from "../socket_proxy/udp_serve.ts";
import { DialWarnings } from "../socket_proxy/dial_warnings.ts";
import { denoListen, type ListenFn } from "../socket_proxy/listen.ts";
import { type UserspaceMetrics, userspaceMetrics } from "./metrics.ts";
import { categorizeEndpoints } from "../model/topology.ts";
import { classEndpoints, type TrafficClass, trafficClasses } from "./traffic_classes.ts";
import { joinHostPort, servicePortNameString } from "../model/types.ts";

/** Options of {@linkcode UserspaceProxier}. */
export interface UserspaceProxierOptions extends BaseProxierOptions {
  /** iptables for portal rules; undefined serves NodePorts only. */
  readonly iptables?: IPTables;
  /**
   * Without `iptables`: why there are none (not root, ip6tables unusable...), said once with the
   * family; false when the mode has said it once for both families (`--userspace-portals=false`).
   */
  readonly noPortals?: string | false;
  /** Address the portal listeners bind (`--bind-address`). */
  readonly listenAddress: string;
  /**
   * `--nodeport-addresses` as configured (`proxier/model/nodeport_addresses.ts` reads it; loopback
   * addresses included, as a socket serves them): NodePorts listen on every address (`0.0.0.0`) or
   * on those of `nodeIPs` inside it.
   */
  readonly portRange: PortRange;
  readonly udpIdleTimeoutMs: number;
  /**
   * Hands out the portal ports (`--proxy-port-range`); the families of one node share one, so their
   * listeners never ask for the same port. Default: this proxier's own.
   */
  readonly allocator?: PortAllocator;
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
  readonly #listeners: PortListeners;
  readonly #limits?: SpliceLimits;
  readonly #balancer: RoundRobinBalancer;
  readonly #udp: UdpServing;
  readonly #events: ServingEvents;
  readonly #tcp: TcpServing;
  readonly #pool?: TcpWorkerPool;
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
    this.#limits = o.tcpLimits;
    this.#balancer = new RoundRobinBalancer({ clock: o.clock, random: o.random });
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
    this.#listeners = new PortListeners({
      listenAddress: o.listenAddress,
      portals: o.iptables !== undefined,
      workers: this.#pool !== undefined,
      allocator: o.allocator ?? new PortAllocator(o.portRange),
      listen: o.listen ?? denoListen,
      balancer: this.#balancer,
      tcp: this.#tcp,
      udp: this.#udp,
      log: o.log,
    });
  }

  /**
   * Returns the service port a connection to `hostname:port` reaches (a portal port on the listen
   * address, or a NodePort on one of the NodePort addresses) and its endpoints; undefined when
   * nothing of ours listens there.
   */
  route(protocol: "TCP" | "UDP" | "SCTP", hostname: string, port: number): UserspaceRoute | undefined {
    return this.#listeners.route(protocol, hostname, port);
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
    return this.#listeners.proxyPort(key, cls);
  }

  /** @inheritdoc */
  protected override modeViewFacts(): Partial<FamilyView> {
    return {
      loopbackNodePorts: this.node.nodePortAddresses(true).allowLocalhost ? "listener" : "none",
      servesServiceIPs: this.#iptables !== undefined,
    };
  }

  /** What `explain` reads: this family's view, and where the listeners send a connection. */
  readonly explain = {
    views: () => [this.familyView()],
    answer: (c: Connection) => this.#answer(c),
  };

  /** Where a connection goes: a NodePort listener, or a portal rule's proxy port. */
  #answer(c: Connection): DatapathAnswer {
    const by = "the userspace proxy's listeners";
    const protocol = c.protocol.toUpperCase() as "TCP" | "UDP" | "SCTP";
    let route = this.route(protocol, c.dst, c.port);
    let rule = `listener ${joinHostPort(c.dst, c.port)}/${protocol}`;
    if (route === undefined && this.#iptables !== undefined) {
      // The portal rules go in the order of the service ports' names: where two claim an address
      // and port, the first named wins (`portals.ts`).
      let name = "";
      for (const p of this.#listeners.values()) {
        if (p.info.protocol !== protocol || p.info.port !== c.port) continue;
        const cls = p.classes.find((x) => x.proxyPort !== 0 && x.plan.portalIPs.includes(c.dst));
        const own = servicePortNameString(p.info.name);
        if (cls === undefined || (route !== undefined && own.localeCompare(name) >= 0)) continue;
        [route, name] = [this.#listeners.routeOf(cls.plan), own];
        rule = `portal ${joinHostPort(c.dst, c.port)}/${protocol} -> ${
          joinHostPort(this.#listenAddress, cls.proxyPort)
        }`;
      }
    }
    if (route === undefined) return { verdict: "none", endpoints: [], rules: [], by };
    const proxied = true;
    if (route.admits !== undefined && !route.admits(c.src)) {
      return {
        verdict: protocol === "UDP" ? "DROP" : "REJECT",
        endpoints: [],
        rules: [rule, `the source ${c.src} is outside loadBalancerSourceRanges: closed at once`],
        by,
        proxied,
      };
    }
    // Nothing listens for a class without endpoints: the kernel refuses (`port_listeners.ts`).
    if (route.endpoints.length === 0) return { verdict: "REJECT", endpoints: [], rules: [rule], by };
    // The proxy opens its own connection: the backend sees the node's address.
    return {
      verdict: "DNAT",
      endpoints: [...route.endpoints].sort(),
      rules: [rule],
      by,
      masquerade: true,
      proxied,
    };
  }

  /** @inheritdoc */
  get onStop(): string {
    const portals = this.#iptables === undefined ? "" : "; portal rules stay";
    return `closing the proxy ports (connections in flight finish${portals})`;
  }

  /** Closes every listener (connections in flight keep going); the kernel rules stay. */
  close(): void {
    this.#retry?.cancel();
    for (const [key] of [...this.#listeners.entries()]) this.#listeners.close(key);
    this.#tcp.close();
    this.#pool?.close();
  }

  /** @inheritdoc */
  protected override async syncRules(ctx: SyncContext): Promise<void> {
    if (this.#iptables === undefined && this.#o.noPortals !== false && !this.#warnedNoPortals) {
      this.#warnedNoPortals = true;
      this.log.warn("No portal rules: only NodePorts are served", {
        family: this.family,
        reason: this.#o.noPortals ?? "no iptables",
      });
    }
    for (const [key] of [...this.#listeners.entries()]) {
      if (!ctx.services.has(key)) this.#listeners.close(key);
    }
    const npa = this.node.nodePortAddresses(true);
    // IPv6 listens on each of the node's addresses: a socket on "::" takes IPv4 connections too,
    // so it could not share a NodePort with the IPv4 side's socket on 0.0.0.0.
    const nodePortHosts = npa.matchAll && this.family === "IPv4" ? ["0.0.0.0"] : npa.nodeIPs(this.node.ips);
    this.#listeners.nodePortHosts = nodePortHosts;
    const udpHosts = {
      portal: udpPortalAddress(this.#listenAddress, this.family, npa.nodeIPs(this.node.ips)),
      nodePorts: udpNodePortHosts(npa, this.node.ips, this.family),
    };
    this.#listeners.udpHosts = udpHosts;
    const unopened = new Map<string, string>();
    const workerPorts: Array<Omit<WorkerPort, "slot">> = [];
    for (const [key, info] of ctx.services) {
      // Each traffic class balances over the endpoints its policy chooses (`traffic_classes.ts`); one
      // without any refuses its connections (nothing listens on its ports).
      const cat = categorizeEndpoints(info, ctx.endpoints.get(key) ?? [], this.node.topology, this.log);
      const refused = new Set(
        trafficClasses(key, info, this.#iptables !== undefined).filter((c) =>
          classEndpoints(c.cls, info, cat).length === 0
        ).map((c) => c.cls),
      );
      const spec = JSON.stringify([
        info.protocol,
        info.clusterIP,
        info.port,
        info.nodePort,
        info.nodePort === 0 ? [] : info.protocol === "UDP" ? udpHosts.nodePorts : nodePortHosts,
        info.protocol === "UDP" ? udpHosts.portal : "",
        info.externalIPs,
        info.loadBalancerIPs,
        info.hasSourceRanges ? info.loadBalancerSourceRanges : null,
        [...refused],
      ]);
      const cur = this.#listeners.get(key);
      if (info.protocol === "SCTP") {
        // Not a failure to retry: this mode cannot proxy SCTP at all (said once per service port).
        if (!this.#warnedSctp.has(key)) {
          this.#warnedSctp.add(key);
          this.log.warn("SCTP is not supported in userspace mode; not served", { service: key });
        }
        continue;
      }
      if (cur?.spec !== spec) {
        if (cur !== undefined) this.#listeners.close(key);
        try {
          this.#listeners.open(key, info, spec, refused);
        } catch (e) {
          unopened.set(key, (e as Error).message);
        }
      }
      for (const c of this.#listeners.get(key)?.classes ?? []) {
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
        this.#listeners.close(key);
      }
    }
    if (this.#iptables !== undefined) await this.#syncPortals(ctx.full);
    this.#reportUnserved(unopened, ctx);
  }

  /**
   * A port another program holds (or none left in `--proxy-port-range`) leaves its Service unserved:
   * the sync succeeds (health stays about syncs), the Service is named in a warning once per reason,
   * counted in `kubeproxy_userspace_unserved_service_ports`, `/readyz` is 503 naming it, and its
   * port is retried with backoff.
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
      if (!unopened.has(key) && this.#listeners.get(key) !== undefined) {
        this.log.info("Serving the Service's port now", { service: key });
      }
    }
    this.#unserved.clear();
    for (const [k, v] of unopened) this.#unserved.set(k, v);
    this.#metrics.unservedPorts(this.family, unopened.size);
    // Not ready while a port it holds is unserved: a start does not take the node over (the other
    // mode's rules stay) and a readiness-gated rollout stops here.
    this.health.setCondition(`unserved-${this.family}`, unservedCondition(unopened));
    if (unopened.size === 0) {
      this.#retry?.cancel();
      this.#retry = undefined;
      return;
    }
    const ms = Math.min(this.#retry === undefined ? 1000 : 2 * this.#retry.ms, this.syncPeriodMs);
    this.#retry?.cancel();
    this.#retry = { ms, cancel: this.clock.setTimer(() => this.sync(), ms) };
  }

  async #syncPortals(full: boolean): Promise<void> {
    const ipt = this.#iptables!;
    if (full) await ensurePortalJumps(ipt);
    const text = portalRules(
      [...this.#listeners.values()].flatMap((p) => p.classes.map((c) => ({ info: p.info, ...c }))),
      this.#listeners.udpHosts.portal,
    );
    if (!full && text === this.#portalText) return;
    await ipt.restoreAll(text, { flush: false, counters: false });
    this.#portalText = text;
  }
}
