/**
 * How traffic from this node's pods is told from the rest (upstream's LocalTrafficDetector), the one
 * reading of `--detect-local-mode` every kernel mode uses: by source CIDR (the cluster CIDR or the
 * Node's pod CIDR), or by the interface a packet came in on (a bridge, or interfaces named with a
 * prefix). Masquerade decisions and the "pods reach every endpoint" short-cut read it.
 * @module
 */
import type { V1Node } from "@kubernetes/client-node";
import { cidrFamily } from "../model/net.ts";
import type { LocalMode } from "../options/config.ts";
import type { IPFamily } from "../model/types.ts";

/** A way to recognise local pod traffic; undefined where the mode cannot tell (no CIDR of this family). */
export type LocalDetector =
  | { readonly kind: "cidr"; readonly cidr: string }
  | { readonly kind: "interface"; readonly name: string; readonly prefix: boolean };

/** What `--detect-local-mode` and its companions say (validated: names are safe in rules). */
export interface LocalDetection {
  readonly mode: LocalMode;
  readonly clusterCIDRs: readonly string[];
  readonly bridgeInterface?: string;
  readonly interfaceNamePrefix?: string;
}

/** Returns the detector of `family` for `d`, reading the Node's pod CIDRs in NodeCIDR mode. */
export function localDetector(
  d: LocalDetection | undefined,
  family: IPFamily,
  node: V1Node | undefined,
): LocalDetector | undefined {
  switch (d?.mode) {
    case undefined:
      return undefined;
    case "BridgeInterface":
      return { kind: "interface", name: d.bridgeInterface!, prefix: false };
    case "InterfaceNamePrefix":
      return { kind: "interface", name: d.interfaceNamePrefix!, prefix: true };
    case "NodeCIDR": {
      const spec = node?.spec;
      const cidrs = spec?.podCIDRs ?? (spec?.podCIDR ? [spec.podCIDR] : []);
      const cidr = cidrs.find((c) => cidrFamily(c) === family);
      return cidr === undefined ? undefined : { kind: "cidr", cidr };
    }
    case "ClusterCIDR": {
      const cidr = d.clusterCIDRs.find((c) => cidrFamily(c) === family);
      return cidr === undefined ? undefined : { kind: "cidr", cidr };
    }
  }
}

/** The iptables match for traffic that is (`local`) or is not local: `-s CIDR`, `! -i cbr0`, `-i veth+`. */
export function iptablesLocalMatch(d: LocalDetector, local: boolean): string {
  const not = local ? "" : "! ";
  return d.kind === "cidr" ? `${not}-s ${d.cidr}` : `${not}-i ${d.name}${d.prefix ? "+" : ""}`;
}

/** The nft match for traffic that is (`local`) or is not local: `ip saddr CIDR`, `iifname != "cbr0"`. */
export function nftLocalMatch(d: LocalDetector, family: IPFamily, local: boolean): string {
  const op = local ? "" : "!= ";
  return d.kind === "cidr"
    ? `${family === "IPv4" ? "ip" : "ip6"} saddr ${op}${d.cidr}`
    : `iifname ${op}"${d.name}${d.prefix ? "*" : ""}"`;
}

/** A stable text of `d`, for "did the Node change our rules" checks and logs. */
export function describeLocalDetector(d: LocalDetector | undefined): string {
  return d === undefined ? "" : d.kind === "cidr" ? d.cidr : `${d.name}${d.prefix ? "*" : ""}`;
}
