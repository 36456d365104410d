/**
 * NodePorts on the loopback address (127.0.0.1 or ::1) served by a socket proxy, for a mode whose
 * kernel rules cannot: nftables mode never sets route_localnet, and IPv6 has none (upstream 1.37's
 * KEP-6032, feature gate KubeProxyNFTablesLocalhostNodePorts). One listener per service port with a
 * node port and endpoints to go to, TCP and UDP (upstream: TCP only); a port without endpoints has
 * no listener, so a connection is refused. The endpoints are the ones external traffic uses
 * (externalTrafficPolicy Local: this node's only; trafficDistribution applies), balanced round
 * robin with the Service's ClientIP affinity. A port another program holds is named in one warning,
 * counted, and tried again at each sync until it is free; every other port is served meanwhile.
 * @module
 */
import { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { IPFamily } from "../model/types.ts";
import { DialWarnings } from "./dial_warnings.ts";
import { denoListen, type Listener, type ListenFn } from "./listen.ts";
import type { SpliceLimits } from "./tcp_copy.ts";
import { type ServingEvents, TcpServing } from "./tcp_serve.ts";
import { UdpServing } from "./udp_serve.ts";

/** The loopback address the listeners bind, by family (upstream's: never another 127.x alias). */
export const LOOPBACK: Readonly<Record<IPFamily, string>> = { IPv4: "127.0.0.1", IPv6: "::1" };

/** What one service port asks of its loopback listener. */
export interface LocalhostNodePort {
  /** The service port as logs name it (`namespace/name:port`). */
  readonly name: string;
  readonly protocol: "TCP" | "UDP" | "SCTP";
  readonly nodePort: number;
  /** `ip:port` of each endpoint new connections are balanced over; empty: no listener. */
  readonly endpoints: readonly string[];
  /** ClientIP affinity timeout; 0 for none. */
  readonly stickyMaxAgeSeconds: number;
}

/** What the listeners report to the mode's metrics. */
export interface LocalhostNodePortMetrics {
  /** Listeners open now (`kubeproxy_nftables_localhost_nodeport_listeners`). */
  listeners(n: number): void;
  /** A listener could not be opened (`..._listener_creation_failures_total`). */
  creationFailed(): void;
}

/** Options of {@linkcode LocalhostNodePorts}. */
export interface LocalhostNodePortsOptions {
  readonly family: IPFamily;
  readonly log: Logger;
  readonly clock: Clock;
  readonly metrics: LocalhostNodePortMetrics;
  /** A UDP session idle this long ends (`--udp-timeout`). */
  readonly udpIdleTimeoutMs: number;
  /** TCP idle and stalled-write bounds; default none. */
  readonly tcpLimits?: SpliceLimits;
  /** Opens the sockets; default the real ones. */
  readonly listen?: ListenFn;
  /** For reproducible shuffles in tests. */
  readonly random?: () => number;
}

interface Open {
  /** Protocol and port: a change reopens the listener. */
  readonly spec: string;
  readonly listener: Listener;
}

/** The loopback listeners of one family; see the module doc. */
export class LocalhostNodePorts {
  /** The address every listener binds. */
  readonly address: string;
  readonly #o: LocalhostNodePortsOptions;
  readonly #listen: ListenFn;
  readonly #balancer: RoundRobinBalancer;
  readonly #tcp: TcpServing;
  readonly #udp: UdpServing;
  /** Per service port key: what it asks. */
  readonly #wanted = new Map<string, LocalhostNodePort>();
  readonly #open = new Map<string, Open>();
  /** Ports that could not be opened, with the reason last reported. */
  readonly #unserved = new Map<string, string>();
  readonly #warnedSctp = new Set<string>();

  /** Opens nothing until {@linkcode sync}. */
  constructor(o: LocalhostNodePortsOptions) {
    this.#o = o;
    this.address = LOOPBACK[o.family];
    this.#listen = o.listen ?? denoListen;
    this.#balancer = new RoundRobinBalancer({ clock: o.clock, random: o.random });
    const dials = new DialWarnings(o);
    const events: ServingEvents = {
      dialFailed: (key, endpoint, error) => dials.failed(key, endpoint, error),
      acceptFailed: (key, error, first) => {
        if (first) o.log.warn("Accepting on a localhost NodePort failed; retrying", { service: key, error });
      },
      acceptRecovered: (key, failures) =>
        o.log.info("Accepting on the localhost NodePort again", { service: key, failures }),
    };
    this.#tcp = new TcpServing({ balancer: this.#balancer, limits: o.tcpLimits, events });
    this.#udp = new UdpServing({ ...o, balancer: this.#balancer, events, idleTimeoutMs: o.udpIdleTimeoutMs });
  }

  /** Number of service ports whose listener cannot be opened now. */
  get unserved(): number {
    return this.#unserved.size;
  }

  /**
   * Applies `changes` (a service port key to what it asks now, undefined when it went away or has
   * no node port); with `full`, they are everything and every other port closes. Then opens what
   * lacks a listener (retrying those that failed before) and closes what has no endpoints.
   */
  sync(changes: Iterable<readonly [string, LocalhostNodePort | undefined]>, full: boolean): void {
    const touched = new Set(this.#unserved.keys());
    if (full) {
      for (const key of this.#wanted.keys()) touched.add(key);
      this.#wanted.clear();
    }
    for (const [key, want] of changes) {
      touched.add(key);
      if (want === undefined) this.#wanted.delete(key);
      else this.#wanted.set(key, want);
    }
    for (const key of touched) this.#reconcile(key);
    this.#o.metrics.listeners(this.#open.size);
  }

  /**
   * Returns the service port a connection to the loopback `protocol` `port` reaches and the
   * endpoints it is balanced over; undefined when nothing of ours listens there (refused).
   */
  route(
    protocol: "TCP" | "UDP" | "SCTP",
    port: number,
  ): { service: string; endpoints: readonly string[] } | undefined {
    for (const key of this.#open.keys()) {
      const w = this.#wanted.get(key)!;
      if (w.protocol === protocol && w.nodePort === port) {
        return { service: key, endpoints: this.#balancer.endpoints(key) };
      }
    }
    return undefined;
  }

  /** Returns the endpoint a new connection from `clientIP` to service port `key` gets, as a real one would. */
  pick(key: string, clientIP: string): string | undefined {
    return this.#balancer.next(key, clientIP);
  }

  /** Closes every listener (connections in flight finish). */
  close(): void {
    for (const key of [...this.#open.keys()]) this.#close(key);
    this.#tcp.close();
    this.#o.metrics.listeners(0);
  }

  #reconcile(key: string): void {
    const want = this.#wanted.get(key);
    const cur = this.#open.get(key);
    if (want === undefined || want.endpoints.length === 0 || want.protocol === "SCTP") {
      if (want?.protocol === "SCTP" && !this.#warnedSctp.has(key)) {
        this.#warnedSctp.add(key);
        this.#o.log.warn("SCTP NodePorts are not served on localhost", { service: want.name });
      }
      if (cur !== undefined) this.#close(key);
      this.#unserved.delete(key);
      this.#balancer.remove(key);
      return;
    }
    this.#balancer.update(key, want.endpoints, want.stickyMaxAgeSeconds);
    this.#udp.dropSessionsNotIn(key, new Set(want.endpoints));
    const spec = `${want.protocol}:${want.nodePort}`;
    if (cur?.spec === spec) return;
    if (cur !== undefined) this.#close(key);
    let listener: Listener;
    try {
      listener = this.#listen({ protocol: want.protocol, hostname: this.address, port: want.nodePort });
    } catch (e) {
      const error = (e as Error).message;
      this.#o.metrics.creationFailed();
      if (this.#unserved.get(key) !== error) {
        this.#o.log.warn(
          "Cannot listen on the localhost NodePort of this Service; retried at each sync, other Services are served",
          { service: want.name, address: this.address, nodePort: want.nodePort, error },
        );
      }
      this.#unserved.set(key, error);
      return;
    }
    if (this.#unserved.delete(key)) {
      this.#o.log.info("Serving the localhost NodePort now", { service: want.name });
    }
    const open = { spec, listener };
    this.#open.set(key, open);
    const listening = () => this.#open.get(key) === open;
    if ("accept" in listener) this.#tcp.serve(listener, key, listening);
    else this.#udp.serve(listener, key, listening);
    this.#o.log.info("Listening on a localhost NodePort", {
      service: want.name,
      address: this.address,
      nodePort: want.nodePort,
      protocol: want.protocol,
    });
  }

  #close(key: string): void {
    const open = this.#open.get(key);
    if (open === undefined) return;
    this.#open.delete(key);
    try {
      open.listener.close();
    } catch { /* already closed */ }
    this.#udp.dropSessionsNotIn(key, new Set());
  }
}
