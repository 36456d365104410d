/**
 * The clients `explain` asks about for one service port: a pod on this node and the node itself on
 * the cluster IP; an external client on the NodePort, each external IP and each load-balancer IP
 * (from inside loadBalancerSourceRanges, and from outside them); the node on its loopback address
 * where NodePorts answer there. Each is one synthetic new connection, as `trace` takes it, from an
 * address that collides with no address any Service, endpoint or the node holds, nor the pods' or the
 * Service CIDRs' (and lies inside or outside the source ranges as asked), unless `--client-ip` names
 * a real client; the node's own connection is from the address the kernel picks toward the
 * Service, where that was asked. A client that cannot be asked here is skipped, with why and what
 * would add it.
 * @module
 */
import { ipBytes } from "../../iptables/ip.ts";
import type { Connection, FamilyView } from "../family_view.ts";
import { cidrContains, ipFamily, isLoopback } from "../model/net.ts";
import type { IPFamily, ServicePortInfo } from "../model/types.ts";
import type { ClientKind, Via } from "./expectation.ts";

/** One client of a service port and the connection it opens. */
export interface Client {
  readonly kind: ClientKind;
  readonly via: Via;
  /** Who it is, for people: `a pod on this node`, `an external client outside the source ranges`. */
  readonly label: string;
  readonly connection: Connection;
}

/** A client of the port that is not asked about here, and why. */
export interface SkippedClient {
  readonly client: ClientKind;
  readonly via: Via;
  readonly label: string;
  /** Why, and what would let it be asked. */
  readonly why: string;
}

/** The clients asked about for one port, and those skipped. */
export interface ClientPlan {
  readonly clients: Client[];
  readonly skipped: SkippedClient[];
}

/** What shapes the clients beyond the port and the view. */
export interface ClientOptions {
  /** `--client-ip`: a real client's address, asked about instead of the synthetic external one. */
  readonly clientIP?: string;
  /**
   * The source address the kernel picks for this node's own connection to `dst` (its route's
   * `src`), where it was asked (a live node); undefined: the node's first address of the family.
   */
  readonly nodeSource?: (dst: string) => string | undefined;
  /**
   * Every address of the node (a live node's interfaces; offline, `--node-ip` or the Node's
   * addresses), where an external client asks each NodePort beside the addresses the view answers
   * NodePorts on: a mode switch may stop (or start) answering on one of them.
   */
  readonly nodeAddresses?: readonly string[];
}

/** The interface an external client's packets come in on, where local detection reads interfaces. */
const UPLINK = "uplink0";

/** Documentation ranges (RFC 5737, RFC 3849) the synthetic external client is taken from, in order. */
const OUTSIDE_RANGES: Readonly<Record<IPFamily, readonly string[]>> = {
  IPv4: ["203.0.113.0/24", "198.51.100.0/24", "192.0.2.0/24"],
  IPv6: ["2001:db8::/64", "2001:db8:1::/64", "2001:db8:2::/64"],
};

/** Returns the address `offset` above `cidr`'s network (the network itself for a host route). */
export function addressIn(cidr: string, offset = 10): string {
  const [ip, bits] = cidr.split("/");
  const bytes = ipBytes(ip)!;
  const hostBits = bytes.length * 8 - Number(bits);
  if (hostBits >= 8) bytes[bytes.length - 1] = offset;
  if (bytes.length === 4) return [...bytes].join(".");
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16));
  return new URL(`http://[${groups.join(":")}]`).hostname.slice(1, -1);
}

/** Returns the first address of `ranges` (offsets 10 to 250) that `taken` does not refuse. */
function freeAddress(ranges: readonly string[], taken: (ip: string) => boolean): string | undefined {
  for (const r of ranges) {
    const bits = Number(r.split("/")[1]);
    // A /31 or /32 (a /127 or /128) has no host part to pick from: its one address.
    const max = bits >= (r.includes(":") ? 127 : 31) ? 0 : 250;
    for (let offset = Math.min(10, max); offset <= max; offset++) {
      const ip = addressIn(r, offset);
      if (cidrContains(r, ip) && !taken(ip)) return ip;
    }
  }
  return undefined;
}

/** Every address the view's Services, endpoints and node hold, once per view. */
const held = new WeakMap<FamilyView, ReadonlySet<string>>();

/** Returns every address `view` holds: each Service's, each endpoint's, the node's. */
function heldAddresses(view: FamilyView): ReadonlySet<string> {
  let set = held.get(view);
  if (set === undefined) {
    const s = new Set<string>([...view.nodeIPs, ...view.nodePortIPs]);
    for (const svc of view.services.values()) {
      s.add(svc.clusterIP);
      for (const ip of svc.externalIPs) s.add(ip);
      for (const ip of svc.loadBalancerIPs) s.add(ip);
    }
    for (const eps of view.endpoints.values()) for (const e of eps) s.add(e.ip);
    held.set(view, set = s);
  }
  return set;
}

/**
 * The node addresses an external client asks a NodePort on: those the view answers NodePorts on
 * (every node address when `--nodeport-addresses` names no CIDR of the family, the first standing
 * for them when no others are asked), and every one of `all` of the family (not loopback).
 */
function nodePortAddresses(view: FamilyView, all: readonly string[] = []): string[] {
  const served = view.nodePortIPs.length > 0
    ? view.nodePortIPs
    : view.nodePortsOnEveryAddress && view.nodeIPs.length > 0
    ? [view.nodeIPs[0]]
    : [];
  const more = all.filter((ip) => ipFamily(ip) === view.family && !isLoopback(ip));
  return [...new Set(more.length > 0 ? [...served, ...more] : served)];
}

/** Returns the clients of `svc` on this node, and those skipped; see the module doc. */
export function clientsOf(svc: ServicePortInfo, view: FamilyView, o: ClientOptions = {}): ClientPlan {
  const family = view.family;
  const protocol = svc.protocol.toLowerCase() as Connection["protocol"];
  const clients: Client[] = [];
  const skipped: SkippedClient[] = [];
  const to = (dst: string, port: number) => ({ dst, port, protocol });
  const d = view.localDetector;
  const ranges = svc.loadBalancerSourceRanges.filter((r) => ipFamily(r.split("/")[0]) === family);
  // Addresses no synthetic client may take: any Service's, any endpoint's, the node's; and ranges
  // that would make it someone else (a pod, a Service).
  const own = heldAddresses(view);
  const notClient = [...view.podCIDRs, ...(d?.kind === "cidr" ? [d.cidr] : []), ...view.serviceCIDRs];
  const taken = (ip: string, inside: readonly string[]) =>
    own.has(ip) || [...notClient, ...inside].some((c) => cidrContains(c, ip));
  const real = o.clientIP !== undefined && ipFamily(o.clientIP) === family ? o.clientIP : undefined;

  if (d === undefined) {
    skipped.push({
      client: "pod",
      via: "cluster IP",
      label: "a pod on this node",
      why:
        `pods cannot be told from other sources in ${family} (no local traffic detection: --cluster-cidr, ` +
        "or --detect-local-mode with its flag, adds it)",
    });
  } else {
    const podRanges = d.kind === "cidr"
      ? [...view.podCIDRs.filter((c) => cidrContains(d.cidr, c.split("/")[0])), d.cidr]
      : view.podCIDRs.length > 0
      ? view.podCIDRs
      : [family === "IPv4" ? "10.255.255.0/24" : "fd00:ffff::/64"];
    const asPod = real !== undefined && d.kind === "cidr" && cidrContains(d.cidr, real);
    const src = asPod ? real : freeAddress(podRanges, (ip) => own.has(ip));
    clients.push({
      kind: "pod",
      via: "cluster IP",
      label: asPod ? `the pod ${real}` : "a pod on this node",
      connection: {
        src: src ?? addressIn(podRanges[0]),
        ...(d.kind === "interface" ? { inInterface: d.name + (d.prefix ? "0" : "") } : {}),
        ...to(svc.clusterIP, svc.port),
      },
    });
  }
  const nodeIP = view.nodeIPs[0];
  if (nodeIP !== undefined) {
    // The source the kernel picks toward the cluster IP (a node may hold an address inside the
    // cluster CIDR, a bridge's gateway, that it never uses toward Services).
    const src = o.nodeSource?.(svc.clusterIP) ?? nodeIP;
    clients.push({
      kind: "node",
      via: "cluster IP",
      label: "this node",
      connection: { src, fromNode: true, ...to(svc.clusterIP, svc.port) },
    });
  } else {
    skipped.push({
      client: "node",
      via: "cluster IP",
      label: "this node",
      why: `no node address of ${family} (--node-ip, or the Node object's addresses)`,
    });
  }
  const from = (src: string) => ({ src, ...(d?.kind === "interface" ? { inInterface: UPLINK } : {}) });
  const outside = from(
    real ?? freeAddress(OUTSIDE_RANGES[family], (ip) => taken(ip, [])) ??
      addressIn(OUTSIDE_RANGES[family][0]),
  );
  const externalLabel = real !== undefined ? `the client ${real}` : "an external client";
  const nodePortIPs = nodePortAddresses(view, o.nodeAddresses);
  for (const [i, ip] of (svc.nodePort === 0 ? [] : nodePortIPs).entries()) {
    clients.push({
      kind: "external",
      via: "NodePort",
      // The first address the view serves is the NodePort's client; each other address its own.
      label: i === 0 ? externalLabel : `${externalLabel} on ${ip}`,
      connection: { ...outside, ...to(ip, svc.nodePort) },
    });
  }
  if (svc.nodePort !== 0 && nodePortIPs.length === 0) {
    skipped.push({
      client: "external",
      via: "NodePort",
      label: externalLabel,
      why: `no address of ${family} answers NodePorts here (--nodeport-addresses, --node-ip)`,
    });
  }
  if (svc.nodePort !== 0 && view.loopbackNodePorts !== "none") {
    const lo = family === "IPv4" ? "127.0.0.1" : "::1";
    clients.push({
      kind: "node",
      via: "NodePort",
      label: `this node on ${lo}`,
      connection: { src: lo, fromNode: true, ...to(lo, svc.nodePort) },
    });
  }
  for (const ip of svc.externalIPs) {
    clients.push({
      kind: "external",
      via: "external IP",
      label: externalLabel,
      connection: { ...outside, ...to(ip, svc.port) },
    });
  }
  for (const ip of svc.loadBalancerIPs) {
    if (real !== undefined) {
      const inRanges = !svc.hasSourceRanges || ranges.some((r) => cidrContains(r, real));
      clients.push({
        kind: "external",
        via: "load balancer IP",
        label: svc.hasSourceRanges
          ? `${externalLabel} ${inRanges ? "inside" : "outside"} loadBalancerSourceRanges`
          : externalLabel,
        connection: { ...outside, ...to(ip, svc.port) },
      });
      continue;
    }
    if (!svc.hasSourceRanges) {
      clients.push({
        kind: "external",
        via: "load balancer IP",
        label: externalLabel,
        connection: { ...outside, ...to(ip, svc.port) },
      });
      continue;
    }
    // One client from inside the ranges and one from outside them, each where no rule names it.
    for (const side of ["inside", "outside"] as const) {
      const src = side === "inside"
        ? freeAddress(ranges, (a) => taken(a, []))
        : freeAddress(OUTSIDE_RANGES[family], (a) => taken(a, ranges));
      const label = `an external client ${side} loadBalancerSourceRanges`;
      if (src !== undefined) {
        clients.push({
          kind: "external",
          via: "load balancer IP",
          label,
          connection: { ...from(src), ...to(ip, svc.port) },
        });
      } else {
        skipped.push({
          client: "external",
          via: "load balancer IP",
          label,
          why: side === "outside"
            ? `loadBalancerSourceRanges (${ranges.join(", ")}) leave no address outside them to ask from`
            : ranges.length === 0
            ? `loadBalancerSourceRanges has no ${family} range`
            : `every address inside ${
              ranges.join(", ")
            } is the node's, the Service's, a pod's or a Service CIDR's`,
        });
      }
    }
  }
  return { clients, skipped };
}
