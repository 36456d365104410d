/**
 * The clients `explain` asks about for one service port: a pod on this node and the node itself on
 * the cluster IP; an external client on the NodePort, each external IP and each load-balancer IP
 * (from inside loadBalancerSourceRanges, and from outside them); the node on its loopback address
 * where NodePorts answer there. Each is one synthetic new connection, as `trace` takes it.
 * @module
 */
import { ipBytes } from "../../../iptables/ip.ts";
import type { Connection, FamilyView } from "../../family_view.ts";
import { cidrContains } from "../../net.ts";
import type { ServicePortInfo } from "../../types.ts";
import type { ClientKind, Via } from "./expectation.ts";

/** One client of a service port and the connection it opens. */
export interface Client {
  readonly kind: ClientKind;
  readonly via: Via;
  /** Who it is, for people: `a pod on this node`, `an external client outside the source ranges`. */
  readonly label: string;
  readonly connection: Connection;
}

/** Documentation addresses (RFC 5737, RFC 3849): an external client no rule names. */
const OUTSIDE = { IPv4: "203.0.113.10", IPv6: "2001:db8::10" } as const;
/** The interface an external client's packets come in on, where local detection reads interfaces. */
const UPLINK = "uplink0";

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

/** Returns the clients of `svc` on this node; see the module doc. */
export function clientsOf(svc: ServicePortInfo, view: FamilyView): Client[] {
  const protocol = svc.protocol.toLowerCase() as Connection["protocol"];
  const out: Client[] = [];
  const to = (dst: string, port: number) => ({ dst, port, protocol });
  const d = view.localDetector;
  if (d !== undefined) {
    const pod = d.kind === "cidr" ? { src: addressIn(d.cidr) } : {
      src: addressIn(view.family === "IPv4" ? "10.255.255.0/24" : "fd00:ffff::/64"),
      inInterface: d.name + (d.prefix ? "0" : ""),
    };
    out.push({
      kind: "pod",
      via: "cluster IP",
      label: "a pod on this node",
      connection: { ...pod, ...to(svc.clusterIP, svc.port) },
    });
  }
  const nodeIP = view.nodeIPs[0];
  if (nodeIP !== undefined) {
    out.push({
      kind: "node",
      via: "cluster IP",
      label: "this node",
      connection: { src: nodeIP, fromNode: true, ...to(svc.clusterIP, svc.port) },
    });
  }
  const outside = {
    src: OUTSIDE[view.family],
    ...(d?.kind === "interface" ? { inInterface: UPLINK } : {}),
  };
  const nodePortIP = view.nodePortIPs[0] ?? (view.nodePortsOnEveryAddress ? nodeIP : undefined);
  if (svc.nodePort !== 0 && nodePortIP !== undefined) {
    out.push({
      kind: "external",
      via: "NodePort",
      label: "an external client",
      connection: { ...outside, ...to(nodePortIP, svc.nodePort) },
    });
  }
  if (svc.nodePort !== 0 && view.loopbackNodePorts !== "none") {
    const lo = view.family === "IPv4" ? "127.0.0.1" : "::1";
    out.push({
      kind: "node",
      via: "NodePort",
      label: `this node on ${lo}`,
      connection: { src: lo, fromNode: true, ...to(lo, svc.nodePort) },
    });
  }
  for (const ip of svc.externalIPs) {
    out.push({
      kind: "external",
      via: "external IP",
      label: "an external client",
      connection: { ...outside, ...to(ip, svc.port) },
    });
  }
  for (const ip of svc.loadBalancerIPs) {
    const ranges = svc.loadBalancerSourceRanges;
    if (ranges.length > 0) {
      out.push({
        kind: "external",
        via: "load balancer IP",
        label: "an external client inside loadBalancerSourceRanges",
        connection: { ...outside, src: addressIn(ranges[0], 1), ...to(ip, svc.port) },
      });
    }
    if (!ranges.some((r) => cidrContains(r, outside.src))) {
      out.push({
        kind: "external",
        via: "load balancer IP",
        label: svc.hasSourceRanges
          ? "an external client outside loadBalancerSourceRanges"
          : "an external client",
        connection: { ...outside, ...to(ip, svc.port) },
      });
    }
  }
  return out;
}
