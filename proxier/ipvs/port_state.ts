/**
 * What one service port asks of the kernel in ipvs mode, as upstream's ipvs proxier programs it:
 * its virtual servers (cluster IP, external IPs, load-balancer IPs, the node port on each node
 * address) with their real servers, its ipset entries, and the addresses bound on kube-ipvs0.
 * Pure: the proxier adds the ports up and diffs them against the kernel.
 * @module
 */
import type { IpvsProtocol, RealServer, VirtualServer } from "../../iptables/ipvsadm.ts";
import type { Logger } from "../runtime/logger.ts";
import { cidrContains, normalizeCIDR } from "../model/net.ts";
import { categorizeEndpoints, internalEndpoints, type NodeTopology } from "../model/topology.ts";
import type { EndpointInfo, ServicePortInfo } from "../model/types.ts";
import { type Guard, SET, type SetName } from "./layout.ts";

/** One virtual server a port wants, with its real servers. */
export interface WantedServer {
  readonly vs: VirtualServer;
  readonly reals: readonly RealServer[];
}

/** What one service port contributes. */
export interface PortState {
  readonly servers: readonly WantedServer[];
  /** `[set, entry]` pairs (sets by their IPv4 name; the proxier maps them to its family). */
  readonly entries: ReadonlyArray<readonly [SetName, string]>;
  /** Addresses to bind on kube-ipvs0. */
  readonly binds: readonly string[];
  /** Entries the filter guards with a rule of their own ({@linkcode Guard}). */
  readonly guards: readonly Guard[];
}

/** What every port's state depends on besides its own objects. */
export interface PortStateOptions {
  /** `--ipvs-scheduler`. */
  readonly scheduler: string;
  readonly topology: NodeTopology;
  /** Addresses NodePorts are served on (this family, not loopback, not on kube-ipvs0). */
  readonly nodePortIPs: readonly string[];
  /** This node's own addresses (external/LB IPs among them are not bound on kube-ipvs0). */
  readonly nodeIPs: ReadonlySet<string>;
  /** This node's primary address, for source ranges that admit the node itself. */
  readonly nodeIP?: string;
  readonly log?: Logger;
}

/** Returns the kernel objects `svc` with `eps` asks for. */
export function portState(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  o: PortStateOptions,
): PortState {
  const protocol = svc.protocol.toLowerCase() as IpvsProtocol;
  const cat = categorizeEndpoints(svc, eps, o.topology, o.log);
  const reals = (list: readonly EndpointInfo[]): RealServer[] =>
    list.map((e) => ({ address: e.ip, port: e.port, weight: 1 }));
  const internal = reals(internalEndpoints(svc, cat));
  // As upstream's syncEndpoint: a Local policy with no local endpoint takes the cluster's, so pods and
  // the node still reach external entries (traffic from elsewhere is dropped by its guard).
  const noLocal = svc.externalPolicyLocal && cat.local.length === 0 && cat.cluster.length > 0;
  const external = reals(svc.externalPolicyLocal && !noLocal ? cat.local : cat.cluster);
  const scheduler = svc.scheduler ?? o.scheduler;
  const flags = new Set(svc.schedFlags ?? []);
  // Upstream sets the source-port hash flag for mh.
  if (scheduler === "mh" && svc.schedFlags === undefined) flags.add("flag-2");
  const vs = (address: string, port: number): VirtualServer => ({
    address,
    protocol,
    port,
    scheduler,
    flags: [...flags].sort(),
    ...(svc.stickyMaxAgeSeconds > 0 ? { persistentTimeout: svc.stickyMaxAgeSeconds } : {}),
  });
  const servers: WantedServer[] = [];
  const entries: Array<[SetName, string]> = [];
  const binds: string[] = [];
  const guards: Guard[] = [];
  const ipPort = (ip: string, port = svc.port) => `${ip},${protocol}:${port}`;
  // Without any usable endpoint a service refuses at once (as the iptables mode); with endpoints
  // elsewhere but none its policy allows here, IPVS has no real server and drops (as upstream).
  const serve = (address: string, port: number, r: RealServer[]) => {
    servers.push({ vs: vs(address, port), reals: r });
    if (!cat.hasAny) guards.push({ guard: "no-endpoints", ip: address, protocol, port });
  };
  const serveExternal = (address: string, port: number) => {
    serve(address, port, external);
    if (noLocal) guards.push({ guard: "no-local-endpoints", ip: address, protocol, port });
  };

  for (const e of eps) {
    if (e.isLocal) entries.push([SET.LOOP_BACK, `${e.ip},${protocol}:${e.port},${e.ip}`]);
  }
  entries.push([SET.CLUSTER_IP, ipPort(svc.clusterIP)]);
  serve(svc.clusterIP, svc.port, internal);
  binds.push(svc.clusterIP);

  for (const ip of svc.externalIPs) {
    entries.push([svc.externalPolicyLocal ? SET.EXTERNAL_IP_LOCAL : SET.EXTERNAL_IP, ipPort(ip)]);
    serveExternal(ip, svc.port);
    if (!o.nodeIPs.has(ip)) binds.push(ip);
  }

  for (const ip of svc.loadBalancerIPs) {
    entries.push([SET.LOAD_BALANCER, ipPort(ip)]);
    if (svc.externalPolicyLocal) entries.push([SET.LOAD_BALANCER_LOCAL, ipPort(ip)]);
    if (svc.hasSourceRanges) {
      entries.push([SET.LOAD_BALANCER_FW, ipPort(ip)]);
      for (const cidr of svc.loadBalancerSourceRanges) {
        entries.push([SET.LOAD_BALANCER_SOURCE_CIDR, `${ipPort(ip)},${ipsetNet(cidr)}`]);
      }
      const fromNode = o.nodeIP !== undefined &&
        svc.loadBalancerSourceRanges.some((c) => cidrContains(c, o.nodeIP!));
      if (fromNode) entries.push([SET.LOAD_BALANCER_SOURCE_IP, `${ipPort(ip)},${ip}`]);
      else guards.push({ guard: "node", ip, protocol, port: svc.port });
    }
    serveExternal(ip, svc.port);
    if (!o.nodeIPs.has(ip)) binds.push(ip);
  }

  if (svc.nodePort !== 0 && o.nodePortIPs.length > 0) {
    if (protocol === "sctp") {
      for (const ip of o.nodePortIPs) {
        entries.push([SET.NODE_PORT_SCTP, ipPort(ip, svc.nodePort)]);
        if (svc.externalPolicyLocal) entries.push([SET.NODE_PORT_LOCAL_SCTP, ipPort(ip, svc.nodePort)]);
      }
    } else {
      const [all, local] = protocol === "tcp"
        ? [SET.NODE_PORT_TCP, SET.NODE_PORT_LOCAL_TCP]
        : [SET.NODE_PORT_UDP, SET.NODE_PORT_LOCAL_UDP];
      entries.push([all, String(svc.nodePort)]);
      if (svc.externalPolicyLocal) entries.push([local, String(svc.nodePort)]);
    }
    for (const ip of o.nodePortIPs) serveExternal(ip, svc.nodePort);
  }
  if (svc.healthCheckNodePort !== 0) {
    entries.push([SET.HEALTH_CHECK_NODE_PORT, String(svc.healthCheckNodePort)]);
  }
  for (const ip of binds) entries.push([SET.IPVS_IPS, ip]);
  return { servers, entries, binds, guards };
}

/**
 * A CIDR as `ipset save` prints a net entry: the network, and a single address without its /32
 * (/128), so the kernel's entries and ours compare equal.
 */
function ipsetNet(cidr: string): string {
  const n = normalizeCIDR(cidr);
  return n.endsWith("/32") && !n.includes(":") ? n.slice(0, -3) : n.endsWith("/128") ? n.slice(0, -4) : n;
}
