/**
 * The userspace mode: a TCP/UDP proxy per service port, reached through NodePort listeners and
 * iptables REDIRECT "portals" for cluster, external and load-balancer IPs.
 * @module
 */
import type { IPTables } from "../../iptables/iptables.ts";
import { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import type { PortRange } from "../options/config.ts";
import { PortAllocator } from "./port_range.ts";
import { BaseProxier, type BaseProxierOptions, type SyncContext } from "../base_proxier.ts";
import { ensurePortalJumps, portalRules } from "./portals.ts";
import { splice } from "./tcp_copy.ts";
import { categorizeEndpoints, internalEndpoints } from "../topology.ts";
import type { ServicePortInfo } from "../types.ts";
import { servicePortNameString } from "../types.ts";

/** Dial timeouts of the successive tries of one connection, as upstream's userspace proxy. */
const DIAL_TIMEOUTS_MS = [250, 500, 1000, 2000];

/** Options of {@linkcode UserspaceProxier}. */
export interface UserspaceProxierOptions extends BaseProxierOptions {
  /** iptables for portal rules; undefined serves NodePorts only. */
  readonly iptables?: IPTables;
  /** Address the portal listeners bind (`--bind-address`). */
  readonly listenAddress: string;
  /** Addresses NodePorts are served on; `0.0.0.0` / `::` for all. */
  readonly nodePortAddresses: readonly string[];
  readonly portRange: PortRange;
  readonly udpIdleTimeoutMs: number;
  /** For reproducible shuffles in tests. */
  readonly random?: () => number;
  /** Opens a listening socket; defaults to `Deno.listen` / `Deno.listenDatagram`. */
  readonly listen?: ListenFn;
}

/** A listening socket of one service port. */
export type Listener = Deno.TcpListener | Deno.DatagramConn;

/** Opens a listener for `protocol` on `hostname:port` (port 0: any free port). */
export type ListenFn = (o: { protocol: "TCP" | "UDP"; hostname: string; port: number }) => Listener;

/** The real sockets. */
function denoListen(o: { protocol: "TCP" | "UDP"; hostname: string; port: number }): Listener {
  const { hostname, port } = o;
  return o.protocol === "TCP"
    ? Deno.listen({ hostname, port, transport: "tcp" })
    : Deno.listenDatagram({ hostname, port, transport: "udp" });
}

/** Where a connection to one of our listening addresses goes. */
export interface UserspaceRoute {
  /** The service port key. */
  readonly service: string;
  /** The endpoints new connections are balanced over (`ip:port`), in rotation order. */
  readonly endpoints: readonly string[];
}

interface PortProxy {
  /** The fields that decide the listeners; a change reopens them. */
  readonly spec: string;
  readonly info: ServicePortInfo;
  /** The bound portal port, 0 when portals are off. */
  readonly proxyPort: number;
  readonly listeners: Listener[];
}

interface UdpSession {
  readonly endpoint: string;
  readonly backend: Deno.DatagramConn;
  lastUsed: number;
  close(): void;
}

/** Proxies in userspace; see the module doc. */
export class UserspaceProxier extends BaseProxier {
  readonly #iptables?: IPTables;
  readonly #listenAddress: string;
  readonly #nodePortAddresses: readonly string[];
  readonly #ports = new Map<string, PortProxy>();
  readonly #allocator: PortAllocator;
  readonly #udpIdleTimeoutMs: number;
  readonly #balancer: RoundRobinBalancer;
  readonly #udpSessions = new Map<string, Set<UdpSession>>();
  readonly #listenFn: ListenFn;
  #portalText = "";
  #warnedNoPortals = false;

  /** Builds the proxier; opens nothing until the first sync. */
  constructor(o: UserspaceProxierOptions) {
    super(o);
    this.#iptables = o.iptables;
    this.#listenAddress = o.listenAddress;
    this.#nodePortAddresses = o.nodePortAddresses;
    this.#allocator = new PortAllocator(o.portRange);
    this.#udpIdleTimeoutMs = o.udpIdleTimeoutMs;
    this.#balancer = new RoundRobinBalancer({ clock: o.clock, random: o.random });
    this.#listenFn = o.listen ?? denoListen;
  }

  /**
   * Returns the service port a connection to `hostname:port` reaches (a portal port on the listen
   * address, or a NodePort on one of the NodePort addresses) and its endpoints; undefined when
   * nothing of ours listens there.
   */
  route(protocol: "TCP" | "UDP" | "SCTP", hostname: string, port: number): UserspaceRoute | undefined {
    const bound = (addr: string) => addr === hostname || addr === "0.0.0.0" || addr === "::";
    for (const [service, p] of this.#ports) {
      if (p.info.protocol !== protocol) continue;
      const portal = p.proxyPort !== 0 && p.proxyPort === port && bound(this.#listenAddress);
      const nodePort = p.info.nodePort === port && this.#nodePortAddresses.some(bound);
      if (portal || nodePort) return { service, endpoints: this.#balancer.endpoints(service) };
    }
    return undefined;
  }

  /** Returns the portal port of a service port key (for tests and `render`); 0 when none. */
  proxyPort(key: string): number {
    return this.#ports.get(key)?.proxyPort ?? 0;
  }

  /** @inheritdoc */
  readonly onStop = "closing the proxy ports (connections in flight finish; portal rules stay)";

  /** Closes every listener (connections in flight keep going); the kernel rules stay. */
  close(): void {
    for (const key of [...this.#ports.keys()]) this.#closePort(key);
  }

  /** @inheritdoc */
  protected override async syncRules(ctx: SyncContext): Promise<void> {
    if (this.#iptables === undefined && !this.#warnedNoPortals) {
      this.#warnedNoPortals = true;
      this.log.warn(
        "No portal rules (iptables unavailable, not root, or --userspace-portals=false): only NodePorts are served",
      );
    }
    for (const key of [...this.#ports.keys()]) {
      if (!ctx.services.has(key)) this.#closePort(key);
    }
    for (const [key, info] of ctx.services) {
      const spec = JSON.stringify([
        info.protocol,
        info.clusterIP,
        info.port,
        info.nodePort,
        info.externalIPs,
        info.loadBalancerIPs,
      ]);
      const cur = this.#ports.get(key);
      if (cur?.spec !== spec) {
        if (cur !== undefined) this.#closePort(key);
        try {
          this.#openPort(key, info, spec);
        } catch (e) {
          this.log.error("Cannot open proxy port; retrying at the next sync", {
            service: servicePortNameString(info.name),
            ...(info.nodePort !== 0 ? { nodePort: info.nodePort } : {}),
            error: (e as Error).message,
          });
        }
      }
      // Traffic reaches us from inside the node (portals, or pods and hosts through NodePorts): the
      // internal policy and topology choose; externalTrafficPolicy cannot apply to a proxy that is
      // the source of every connection it makes.
      const cat = categorizeEndpoints(info, ctx.endpoints.get(key) ?? [], this.topology, this.log);
      const eps = internalEndpoints(info, cat).map((e) => e.key);
      this.#balancer.update(key, eps, info.stickyMaxAgeSeconds);
      this.#dropSessionsNotIn(key, new Set(eps));
    }
    if (this.#iptables !== undefined) await this.#syncPortals(ctx.full);
  }

  #openPort(key: string, info: ServicePortInfo, spec: string): void {
    const listeners: Listener[] = [];
    let proxyPort = 0;
    try {
      if (this.#iptables !== undefined) {
        const want = this.#allocator.allocate();
        if (want === undefined) throw new Error("--proxy-port-range is exhausted");
        const l = this.#listen(info, this.#listenAddress, want);
        listeners.push(l);
        proxyPort = (l.addr as Deno.NetAddr).port;
      }
      if (info.nodePort !== 0) {
        for (const addr of this.#nodePortAddresses) listeners.push(this.#listen(info, addr, info.nodePort));
      }
    } catch (e) {
      for (const l of listeners) l.close();
      throw e;
    }
    this.#ports.set(key, { spec, info, proxyPort, listeners });
    for (const l of listeners) {
      if ("accept" in l) this.#serveTCP(l, key);
      else this.#serveUDP(l, key);
    }
    // Without portals a ClusterIP-only port has nothing to listen on here; nothing worth a line.
    if (listeners.length === 0) return;
    this.log.info("Opened proxy port", {
      service: servicePortNameString(info.name),
      protocol: info.protocol,
      ...(proxyPort !== 0 ? { proxyPort } : {}),
      ...(info.nodePort !== 0 ? { nodePort: info.nodePort } : {}),
    });
  }

  #listen(info: ServicePortInfo, hostname: string, port: number): Listener {
    if (info.protocol === "SCTP") throw new Error("SCTP is not supported in userspace mode");
    return this.#listenFn({ protocol: info.protocol, hostname, port });
  }

  #closePort(key: string): void {
    const p = this.#ports.get(key);
    if (p === undefined) return;
    this.#ports.delete(key);
    for (const l of p.listeners) {
      try {
        l.close();
      } catch { /* already closed */ }
    }
    if (p.proxyPort !== 0) this.#allocator.release(p.proxyPort);
    this.#balancer.remove(key);
    this.#dropSessionsNotIn(key, new Set());
    if (p.listeners.length > 0) {
      this.log.info("Closed proxy port", { service: servicePortNameString(p.info.name) });
    }
  }

  async #serveTCP(listener: Deno.TcpListener, key: string): Promise<void> {
    try {
      for await (const conn of listener) this.#handleTCP(conn, key);
    } catch {
      // The listener was closed.
    }
  }

  async #handleTCP(client: Deno.TcpConn, key: string): Promise<void> {
    const clientIP = (client.remoteAddr as Deno.NetAddr).hostname;
    let backend: Deno.TcpConn | undefined;
    for (let i = 0; i < DIAL_TIMEOUTS_MS.length && backend === undefined; i++) {
      const ep = this.#balancer.next(key, clientIP, i > 0);
      if (ep === undefined) break;
      const { hostname, port } = splitEndpoint(ep);
      try {
        backend = await Deno.connect({ hostname, port, signal: AbortSignal.timeout(DIAL_TIMEOUTS_MS[i]) });
      } catch (e) {
        this.log.debug("Dial failed, trying the next endpoint", {
          endpoint: ep,
          error: (e as Error).message,
        });
      }
    }
    if (backend === undefined) {
      client.close();
      return;
    }
    backend.setNoDelay(true);
    client.setNoDelay(true);
    await splice(client, backend);
  }

  async #serveUDP(sock: Deno.DatagramConn, key: string): Promise<void> {
    const sessions = new Map<string, UdpSession>();
    try {
      for (;;) {
        const [data, addr] = await sock.receive();
        const client = addr as Deno.NetAddr;
        const ck = `${client.hostname}|${client.port}`;
        let s = sessions.get(ck);
        if (s === undefined) {
          s = this.#newUdpSession(sock, client, key, () => sessions.delete(ck));
          if (s === undefined) continue;
          sessions.set(ck, s);
        }
        s.lastUsed = this.clock.now();
        const { hostname, port } = splitEndpoint(s.endpoint);
        await s.backend.send(data, { transport: "udp", hostname, port }).catch((e) =>
          this.log.debug("UDP send to endpoint failed", { endpoint: s!.endpoint, error: String(e) })
        );
      }
    } catch {
      // The socket was closed.
    } finally {
      for (const s of sessions.values()) s.close();
    }
  }

  #newUdpSession(
    sock: Deno.DatagramConn,
    client: Deno.NetAddr,
    key: string,
    forget: () => void,
  ): UdpSession | undefined {
    const endpoint = this.#balancer.next(key, client.hostname);
    if (endpoint === undefined) return undefined;
    const backend = Deno.listenDatagram({
      transport: "udp",
      hostname: this.family === "IPv4" ? "0.0.0.0" : "::",
      port: 0,
    });
    let cancelTimer = () => {};
    const session: UdpSession = {
      endpoint,
      backend,
      lastUsed: this.clock.now(),
      close: () => {
        cancelTimer();
        forget();
        this.#udpSessions.get(key)?.delete(session);
        try {
          backend.close();
        } catch { /* already closed */ }
      },
    };
    let set = this.#udpSessions.get(key);
    if (set === undefined) this.#udpSessions.set(key, set = new Set());
    set.add(session);
    const expire = () => {
      const idle = this.clock.now() - session.lastUsed;
      if (idle >= this.#udpIdleTimeoutMs) session.close();
      else cancelTimer = this.clock.setTimer(expire, this.#udpIdleTimeoutMs - idle);
    };
    cancelTimer = this.clock.setTimer(expire, this.#udpIdleTimeoutMs);
    (async () => {
      try {
        for (;;) {
          const [reply] = await backend.receive();
          session.lastUsed = this.clock.now();
          await sock.send(reply, client);
        }
      } catch {
        // Session closed or the service socket went away.
      }
    })();
    return session;
  }

  /** Ends UDP sessions pinned to endpoints that are gone, so the next datagram picks a live one. */
  #dropSessionsNotIn(key: string, live: ReadonlySet<string>): void {
    for (const s of [...(this.#udpSessions.get(key) ?? [])]) {
      if (!live.has(s.endpoint)) s.close();
    }
  }

  async #syncPortals(full: boolean): Promise<void> {
    const ipt = this.#iptables!;
    if (full) await ensurePortalJumps(ipt);
    const text = portalRules([...this.#ports.values()]);
    if (!full && text === this.#portalText) return;
    await ipt.restoreAll(text, { flush: false, counters: false });
    this.#portalText = text;
  }
}

/** Splits `ip:port` / `[ip]:port`. */
export function splitEndpoint(ep: string): { hostname: string; port: number } {
  const i = ep.lastIndexOf(":");
  return { hostname: ep.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(ep.slice(i + 1)) };
}
