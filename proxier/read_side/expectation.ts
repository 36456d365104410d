/**
 * The expected answer to "where does this new connection go": from a family's view alone (the
 * Services and endpoints as the proxy last synced them, and the node facts), without reading a rule.
 * It says which endpoints the client reaches, why each other endpoint of the port is not among them,
 * what happens instead when none is (REJECT, DROP), and whether the source is masqueraded and why.
 * `explain` sets it beside the kernel's own answer (`trace`); any difference is a disagreement.
 *
 * Each mode follows its upstream datapath, so the answer depends on the mode where those differ: the
 * mode's {@linkcode DatapathTraits} say how (they are the reasons the flow table gives for a row that
 * does not apply to a mode).
 * @module
 */
import type { DatapathTraits } from "../datapath_traits.ts";
import type { Connection, FamilyView } from "../family_view.ts";
import { cidrContains, ipFamily, isLoopback } from "../model/net.ts";
import { canServe, type CategorizedEndpoints, categorizeEndpoints, topologyMode } from "../model/topology.ts";
import type { EndpointInfo, ServicePortInfo } from "../model/types.ts";
import { interfaceMatches } from "../trace/packet.ts";
import { masquerade } from "./masquerade.ts";

/** Which address of the Service the connection is to. */
export type Via = "cluster IP" | "NodePort" | "external IP" | "load balancer IP";

/** Who opens it, as the rules tell clients apart. */
export type ClientKind = "pod" | "node" | "external";

/** Why a verdict other than DNAT (stable codes of the JSON schema). */
export type VerdictReason =
  | "reached"
  | "not-a-service-address"
  | "no-endpoints"
  | "no-local-endpoints"
  | "source-range"
  | "unserved-port"
  | "unallocated-service-cidr"
  | "protocol-not-proxied";

/** Why an endpoint of the port is not reached (stable codes of the JSON schema). */
export type ExclusionReason =
  | "not-ready"
  | "terminating"
  | "remote-internal-local"
  | "remote-external-local"
  | "topology-zone"
  | "topology-node"
  | "source-range"
  | "unusable"
  | "wrong-family";

/** One endpoint the connection does not reach, and why. */
export interface Exclusion {
  readonly endpoint: string;
  readonly reason: ExclusionReason;
  readonly detail: string;
}

/** The expected answer; see the module doc. */
export interface Expectation {
  readonly verdict: "DNAT" | "REJECT" | "DROP" | "none";
  readonly reason: VerdictReason;
  /** One line: why this verdict. */
  readonly why: string;
  /** The service port reached (its key), when the destination is one. */
  readonly servicePort?: string;
  readonly via?: Via;
  readonly client: ClientKind;
  /** `ip:port` of every endpoint the connection can reach, sorted. */
  readonly endpoints: string[];
  /** Serving+terminating endpoints are used because none is ready. */
  readonly terminatingFallback: boolean;
  readonly excluded: Exclusion[];
  /** The endpoint sees the node's (or the service's) address; undefined where no rule decides (userspace). */
  readonly masquerade?: boolean;
  readonly masqueradeWhy?: string;
}

const sorted = (eps: readonly EndpointInfo[]) => eps.map((e) => e.key).sort();

type Found = { key: string; svc: ServicePortInfo; via: Via };

/** Each view's service ports by address and port, and by NodePort, built once per view. */
const indexes = new WeakMap<
  FamilyView,
  { readonly addresses: Map<string, Found>; readonly nodePorts: Map<string, Found> }
>();

/**
 * Returns `view`'s service ports by `PROTOCOL|address|port` and by `PROTOCOL|nodePort`. Where
 * Services claim the same address and port, the one whose port key sorts first is indexed: it wins,
 * as the kernel modes write their rules (`claims.ts`).
 */
function portIndex(
  view: FamilyView,
): { readonly addresses: Map<string, Found>; readonly nodePorts: Map<string, Found> } {
  let index = indexes.get(view);
  if (index !== undefined) return index;
  index = { addresses: new Map(), nodePorts: new Map() };
  const put = (m: Map<string, Found>, id: string, f: Found) => {
    const had = m.get(id);
    if (had === undefined || f.key < had.key) m.set(id, f);
  };
  for (const [key, svc] of view.services) {
    const p = svc.protocol;
    put(index.addresses, `${p}|${svc.clusterIP}|${svc.port}`, { key, svc, via: "cluster IP" });
    for (const ip of svc.externalIPs) {
      put(index.addresses, `${p}|${ip}|${svc.port}`, { key, svc, via: "external IP" });
    }
    for (const ip of svc.loadBalancerIPs) {
      put(index.addresses, `${p}|${ip}|${svc.port}`, { key, svc, via: "load balancer IP" });
    }
    if (svc.nodePort !== 0) put(index.nodePorts, `${p}|${svc.nodePort}`, { key, svc, via: "NodePort" });
  }
  indexes.set(view, index);
  return index;
}

/** Returns the service port `c` is addressed to and how, or undefined. */
function findPort(
  view: FamilyView,
  c: Connection,
): { key: string; svc: ServicePortInfo; via: Via } | undefined {
  const proto = c.protocol.toUpperCase();
  const loopback = ipFamily(c.dst) === "IPv4" ? c.dst.startsWith("127.") : c.dst === "::1";
  // The mode's own listeners answer whoever reaches loopback; rules and the socket proxy, the node.
  const nodePortHere = loopback
    ? view.loopbackNodePorts !== "none" && (c.fromNode === true || view.loopbackNodePorts === "listener")
    : view.nodePortIPs.includes(c.dst) || (view.nodePortsOnEveryAddress && view.nodeIPs.includes(c.dst));
  const index = portIndex(view);
  const at = index.addresses.get(`${proto}|${c.dst}|${c.port}`);
  if (at !== undefined) return at;
  return nodePortHere ? index.nodePorts.get(`${proto}|${c.port}`) : undefined;
}

/** Returns who opens `c` as the rules see it. */
function clientKind(view: FamilyView, c: Connection): ClientKind {
  if (c.fromNode === true) return "node";
  const d = view.localDetector;
  if (d === undefined) return "external";
  if (d.kind === "cidr") return cidrContains(d.cidr, c.src) ? "pod" : "external";
  return c.inInterface !== undefined && interfaceMatches(c.inInterface, d.prefix ? `${d.name}+` : d.name)
    ? "pod"
    : "external";
}

/** The datapath an expectation is for: the mode's name (for people) and its traits. */
export interface ExpectedDatapath {
  readonly name: string;
  readonly traits: DatapathTraits;
}

/** Returns the expected answer for `c` in `mode`; see the module doc. */
export function expectConnection(mode: ExpectedDatapath, view: FamilyView, c: Connection): Expectation {
  const { traits } = mode;
  const client = clientKind(view, c);
  const found = findPort(view, c);
  const base = { client, endpoints: [], excluded: [], terminatingFallback: false };
  if (found === undefined) return unaddressed(mode, view, c, base);
  const sockets = traits.carrier === "sockets";
  const { key, svc, via } = found;
  const eps = view.endpoints.get(key) ?? [];
  const at = { ...base, servicePort: key, via };
  if (via !== "NodePort" && view.servesServiceIPs === false) {
    return {
      ...at,
      verdict: "none",
      reason: "not-a-service-address",
      why: "only NodePorts are served here: the userspace proxy has no portal rules " +
        "(not root, iptables missing, or --userspace-portals=false)",
    };
  }
  if (sockets && svc.protocol === "SCTP") {
    return {
      ...at,
      verdict: "none",
      reason: "protocol-not-proxied",
      why: `${mode.name} mode proxies TCP and UDP only`,
    };
  }
  const cat = categorizeEndpoints(svc, eps, view.topology);
  const external = via !== "cluster IP";
  if (
    external && via === "load balancer IP" && svc.hasSourceRanges && traits.enforcesSourceRanges &&
    !svc.loadBalancerSourceRanges.some((r) => cidrContains(r, c.src))
  ) {
    // A socket proxy closes the connection (drops the datagram) at once; the rules drop it.
    return {
      ...at,
      verdict: sockets && svc.protocol !== "UDP" ? "REJECT" : "DROP",
      reason: "source-range",
      why: `the source ${c.src} is outside loadBalancerSourceRanges (${
        svc.loadBalancerSourceRanges.join(", ")
      })${
        sockets ? `: the ${mode.name} proxy ${svc.protocol === "UDP" ? "drops it" : "closes it at once"}` : ""
      }`,
      excluded: eps.map((e) => ({
        endpoint: e.key,
        reason: "source-range",
        detail: "the source is dropped before any endpoint is chosen",
      })),
    };
  }
  // Which endpoints, and under which policy.
  const local = external && svc.externalPolicyLocal;
  const socket = via === "NodePort" && view.loopbackNodePorts === "socket" && isLoopback(c.dst);
  let chosen: EndpointInfo[];
  let policy: "internal" | "external" | "cluster";
  if (socket) {
    // The socket proxy is a client of the Service like any outside one: no short-circuit.
    chosen = local ? cat.local : cat.cluster;
    policy = local ? "external" : "cluster";
    if (chosen.length === 0) {
      return {
        ...at,
        verdict: "REJECT",
        reason: cat.hasAny ? "no-local-endpoints" : "no-endpoints",
        why: "no endpoint for this NodePort's loopback listener, so there is none: refused",
        excluded: exclusions(svc, eps, [], policy, view, cat),
      };
    }
  } else if (!external) {
    chosen = svc.internalPolicyLocal ? cat.local : cat.cluster;
    policy = svc.internalPolicyLocal ? "internal" : "cluster";
  } else if (!local) {
    chosen = cat.cluster;
    policy = "cluster";
  } else if (traits.externalLocal === "local-first") {
    // ipvs: the local endpoints for everyone; without one, the cluster's for pods and the node.
    const noLocal = cat.local.length === 0 && cat.cluster.length > 0;
    chosen = noLocal && client !== "external" ? cat.cluster : cat.local;
    policy = noLocal && client !== "external" ? "cluster" : "external";
  } else if (traits.externalLocal === "local-for-all") {
    chosen = cat.local;
    policy = "external";
  } else if (client === "pod" || client === "node") {
    // Short-circuit: pods and the node reach every endpoint, as if through the load balancer.
    chosen = cat.cluster;
    policy = "cluster";
    if (
      traits.externalLocal === "short-circuit-node-drops" && client === "node" && cat.local.length === 0 &&
      cat.hasAny
    ) {
      return {
        ...at,
        verdict: "DROP",
        reason: "no-local-endpoints",
        why: "externalTrafficPolicy Local and no endpoint on this node: nftables drops it before DNAT, " +
          "the node's own connection too",
        excluded: exclusions(svc, eps, [], "external", view, cat),
      };
    }
  } else {
    chosen = cat.local;
    policy = "external";
  }
  const fallback = chosen.length > 0 && chosen.every((e) => !e.ready);
  const excluded = exclusions(svc, eps, chosen, policy, view, cat);
  if (chosen.length === 0) {
    // A socket proxy listens on nothing for a class without endpoints: the kernel refuses (a reset,
    // ICMP port-unreachable for a datagram).
    const nothingListens = sockets ? ": nothing listens there, so the kernel refuses it" : "";
    if (!cat.hasAny) {
      return {
        ...at,
        verdict: "REJECT",
        reason: "no-endpoints",
        why: `no usable endpoint anywhere: refused${nothingListens}`,
        excluded,
      };
    }
    return {
      ...at,
      verdict: sockets ? "REJECT" : "DROP",
      reason: "no-local-endpoints",
      why: `${
        policy === "internal" ? "internal" : "external"
      }TrafficPolicy Local and no endpoint on this node${nothingListens}`,
      excluded,
    };
  }
  const masq = socket
    ? { masquerade: true, masqueradeWhy: "the loopback NodePort's socket proxy connects from the node" }
    : masquerade(mode, view, c, client, external, local, chosen);
  return {
    ...at,
    verdict: "DNAT",
    reason: "reached",
    why: `${chosen.length} endpoint${chosen.length === 1 ? "" : "s"} by ${
      policy === "cluster" ? "the cluster's" : "this node's"
    } ${policy === "cluster" ? "endpoints" : "endpoints only"}${
      fallback ? " (serving+terminating: none is ready)" : ""
    }`,
    endpoints: sorted(chosen),
    terminatingFallback: fallback,
    excluded,
    ...masq,
  };
}

/** The answer for a destination no service port holds. */
function unaddressed(
  { name, traits }: ExpectedDatapath,
  view: FamilyView,
  c: Connection,
  base: Pick<Expectation, "client" | "endpoints" | "excluded" | "terminatingFallback">,
): Expectation {
  const proto = c.protocol.toUpperCase();
  const services = [...view.services.values()];
  const rejected = traits.rejectsUnservedPorts === "cluster-ips"
    ? services.some((s) => s.clusterIP === c.dst)
    : traits.rejectsUnservedPorts === "service-ips" && services.some((s) =>
      s.protocol === proto &&
      (s.clusterIP === c.dst || s.externalIPs.includes(c.dst) || s.loadBalancerIPs.includes(c.dst))
    );
  if (rejected) {
    return {
      ...base,
      verdict: "REJECT",
      reason: "unserved-port",
      why: `a service address, but no Service serves ${proto} port ${c.port} on it: ${name} mode rejects it`,
    };
  }
  if (traits.dropsUnallocatedServiceIPs && view.serviceCIDRs.some((cidr) => cidrContains(cidr, c.dst))) {
    return {
      ...base,
      verdict: "DROP",
      reason: "unallocated-service-cidr",
      why: `inside a ServiceCIDR, and no Service holds the address: ${name} mode drops it`,
    };
  }
  return {
    ...base,
    verdict: "none",
    reason: "not-a-service-address",
    why: "no Service answers on this address and port here: the rules leave the packet alone",
  };
}

/** Why each endpoint of the port outside `chosen` is not reached. */
function exclusions(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  chosen: readonly EndpointInfo[],
  policy: "internal" | "external" | "cluster",
  view: FamilyView,
  cat: CategorizedEndpoints,
): Exclusion[] {
  const reached = new Set(chosen.map((e) => e.key));
  const anyReady = (local: boolean) => eps.some((e) => e.ready && (!local || e.isLocal));
  const topo = policy === "cluster" ? topologyMode(svc, eps, view.topology) : "";
  const out: Exclusion[] = [];
  for (const e of eps) {
    if (reached.has(e.key)) continue;
    const localOnly = policy !== "cluster";
    let reason: ExclusionReason;
    let detail: string;
    if (localOnly && !e.isLocal) {
      reason = policy === "internal" ? "remote-internal-local" : "remote-external-local";
      detail = `on another node, and ${policy}TrafficPolicy is Local`;
    } else if (!canServe(e)) {
      reason = "not-ready";
      detail = e.terminating ? "terminating and no longer serving" : "not ready";
    } else if (!e.ready) {
      reason = "terminating";
      detail = "terminating (still serving): used only while no endpoint is ready" +
        (anyReady(localOnly) ? ", and some are" : "");
    } else if (topo === "PreferSameNode") {
      reason = "topology-node";
      detail = `hinted for node ${e.nodeHints.join(", ")}; this node is ${view.topology.nodeName} ` +
        "(trafficDistribution PreferSameNode)";
    } else if (topo === "PreferSameZone") {
      reason = "topology-zone";
      detail = `hinted for zone ${e.zoneHints.join(", ")}; this node is in zone ${view.topology.zone} ` +
        "(trafficDistribution PreferClose / PreferSameZone)";
    } else {
      reason = "unusable";
      detail = cat.hasAny ? "not usable here" : "no usable endpoint";
    }
    out.push({ endpoint: e.key, reason, detail });
  }
  return out.sort((a, b) => (a.endpoint < b.endpoint ? -1 : 1));
}
