/**
 * Whether the endpoint of a new connection sees the client's address or the node's, and why: the
 * rules' masquerade marks (traffic policy, local detection by source or interface, hairpin,
 * `--masquerade-all`) and where the packet goes after DNAT (one of the node's own addresses is
 * delivered to it without reaching postrouting). `expectation.ts` asks it for a reached port.
 * @module
 */
import type { Connection, FamilyView } from "../family_view.ts";
import { cidrContains, isLoopback } from "../model/net.ts";
import type { EndpointInfo } from "../model/types.ts";
import type { DatapathTraits } from "../datapath_traits.ts";

/** The datapath asked about: its name (for people) and its traits. */
type Datapath = { readonly name: string; readonly traits: DatapathTraits };
/** Who opens the connection, as the rules tell clients apart. */
type ClientKind = "pod" | "node" | "external";

/** Whether the endpoint sees the node's address, and why; see the module doc. */
export function masquerade(
  mode: Datapath,
  view: FamilyView,
  c: Connection,
  client: ClientKind,
  external: boolean,
  local: boolean,
  chosen: readonly EndpointInfo[],
): { masquerade?: boolean; masqueradeWhy: string } {
  const rules = masqueradeRules(mode, view, c, client, external, local, chosen);
  // A packet from outside the node DNATed to one of the node's own addresses is delivered to it
  // (prerouting, then input): it never reaches postrouting, where masquerading happens. The node's
  // own packets always pass postrouting. A socket proxy's connection is the node's own, whatever the
  // endpoint's address.
  if (rules.masquerade !== true || client === "node" || mode.traits.carrier === "sockets") return rules;
  const delivered = chosen.filter((e) => isNodeAddress(view, e.ip));
  if (delivered.length === 0) return rules;
  const here = "on this node's own address: delivered to the node, never masqueraded";
  if (delivered.length === chosen.length) {
    return {
      masquerade: false,
      masqueradeWhy: `the endpoint${chosen.length === 1 ? " is" : "s are"} ${here}`,
    };
  }
  return {
    masqueradeWhy: `${rules.masqueradeWhy}; but ${delivered.map((e) => e.key).join(", ")} ${
      delivered.length === 1 ? "is" : "are"
    } ${here}`,
  };
}

/** True when `ip` is one of the node's own addresses (its interfaces', or loopback). */
function isNodeAddress(view: FamilyView, ip: string): boolean {
  return isLoopback(ip) || view.nodeIPs.includes(ip);
}

/** Whether the rules mark the connection for masquerading, and why. */
function masqueradeRules(
  { name, traits }: Datapath,
  view: FamilyView,
  c: Connection,
  client: ClientKind,
  external: boolean,
  local: boolean,
  chosen: readonly EndpointInfo[],
): { masquerade?: boolean; masqueradeWhy: string } {
  if (traits.carrier === "sockets") {
    return {
      masquerade: true,
      masqueradeWhy: `the ${name} proxy opens its own connection: endpoints see the node's address`,
    };
  }
  const itself = (e: EndpointInfo) => e.ip === c.src && (traits.hairpin === "every-endpoint" || e.isLocal);
  if (chosen.every(itself)) {
    return { masquerade: true, masqueradeWhy: "hairpin: the endpoint reaches itself" };
  }
  const rules = marks(view, c, client, external, local, traits);
  // A client that is one of the endpoints reaches itself on some paths: those are masqueraded.
  if (rules.masquerade === false && chosen.some(itself)) {
    return {
      masqueradeWhy: `${rules.masqueradeWhy}; but masqueraded when it reaches itself (hairpin)`,
    };
  }
  return rules;
}

/** The masquerade mark of the rules for a connection that does not reach its own client. */
function marks(
  view: FamilyView,
  c: Connection,
  client: ClientKind,
  external: boolean,
  local: boolean,
  traits: DatapathTraits,
): { masquerade?: boolean; masqueradeWhy: string } {
  if (!external) {
    if (view.masqueradeAll) return { masquerade: true, masqueradeWhy: "--masquerade-all" };
    const d = view.localDetector;
    if (d === undefined) {
      return {
        masquerade: false,
        masqueradeWhy:
          "pods cannot be told apart (no local detection for this family): nothing is masqueraded",
      };
    }
    // The rules tell pod traffic by its source address (ClusterCIDR, NodeCIDR) whoever sends it,
    // the node included; by the interface it came in on otherwise, and the node's comes in on none.
    if (client === "node" && d.kind === "cidr" && cidrContains(d.cidr, c.src)) {
      return {
        masquerade: false,
        masqueradeWhy: `the node's source ${c.src} is in ${d.cidr}, which the rules take for a pod's: kept`,
      };
    }
    return client === "pod"
      ? {
        masquerade: false,
        masqueradeWhy: `from this node's pods (${detectorText(view, true)}): the source is kept`,
      }
      : {
        masquerade: true,
        masqueradeWhy: `not from this node's pods (${detectorText(view, false)}): masqueraded`,
      };
  }
  if (client === "node") return { masquerade: true, masqueradeWhy: "from the node itself: masqueraded" };
  if (local) {
    return client === "pod" && traits.externalLocal !== "local-first"
      ? { masquerade: false, masqueradeWhy: "a pod short-circuits to the Service: its source is kept" }
      : { masquerade: false, masqueradeWhy: "externalTrafficPolicy Local keeps the client's address" };
  }
  return {
    masquerade: true,
    masqueradeWhy: "externalTrafficPolicy Cluster: the endpoint may be on another node, so masqueraded",
  };
}

/** How local detection told the client apart: `source in 10.244.0.0/16`, `not in on cbr0`. */
function detectorText(view: FamilyView, pod: boolean): string {
  const d = view.localDetector!;
  return d.kind === "cidr"
    ? `source ${pod ? "in" : "outside"} ${d.cidr}`
    : `${pod ? "" : "not "}in on ${d.name}${d.prefix ? "*" : ""}`;
}
