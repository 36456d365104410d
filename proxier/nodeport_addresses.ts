/**
 * The one reading of `--nodeport-addresses` for every mode, as upstream's
 * `pkg/proxy/util/nodeport_addresses.go` with `cmd/kube-proxy`'s resolution of `primary`:
 * - CIDRs of this family restrict NodePorts to the node's addresses inside them;
 * - `primary` is the Node's primary address of this family (its first InternalIP, else ExternalIP);
 * - no CIDR of this family (nothing configured, only the other family's, or `primary` while the
 *   Node's address is unknown) means every address of the node, as upstream's `0.0.0.0/0`;
 * - loopback addresses answer only in IPv4, and only where the mode allows it
 *   (`--iptables-localhost-nodeports`); IPv6 link-local addresses never do.
 * @module
 */
import { cidrContains, hostPrefix, ipFamily, isLoopback } from "./net.ts";
import type { IPFamily } from "./types.ts";

/** The `--nodeport-addresses` value meaning the node's primary IPs (upstream 1.29+). */
export const NODE_PORT_PRIMARY = "primary";

/** Where NodePorts answer for one IP family; see the module doc. */
export class NodePortAddresses {
  /** This family's CIDRs, `primary` resolved; empty when {@linkcode matchAll}. */
  readonly cidrs: readonly string[];
  /** Every address of the node answers (no CIDR of this family applies). */
  readonly matchAll: boolean;
  /** IPv4 loopback addresses answer too (only when the mode allows and the CIDRs include them). */
  readonly allowLocalhost: boolean;
  readonly #family: IPFamily;
  readonly #primary?: string;

  /**
   * Reads `configured` (`--nodeport-addresses`: CIDRs of both families, or `primary`) for `family`;
   * `primaryIP` is the Node's primary address when known. `allowIPv4Localhost`: the mode can serve
   * NodePorts on 127.0.0.0/8 (iptables' `--iptables-localhost-nodeports`).
   */
  constructor(
    family: IPFamily,
    configured: readonly string[],
    primaryIP: string | undefined,
    allowIPv4Localhost = false,
  ) {
    this.#family = family;
    if (primaryIP !== undefined && ipFamily(primaryIP) === family) this.#primary = primaryIP;
    const cidrs = configured.flatMap((c) => {
      if (c !== NODE_PORT_PRIMARY) return ipFamily(c.split("/")[0]) === family ? [c] : [];
      // A loopback primary address is upstream's stand-in for an unknown one.
      return primaryIP !== undefined && ipFamily(primaryIP) === family && !isLoopback(primaryIP)
        ? [primaryIP + hostPrefix(primaryIP)]
        : [];
    });
    this.matchAll = cidrs.length === 0 || cidrs.some((c) => /^(0\.0\.0\.0|::)\/0$/.test(c));
    this.cidrs = this.matchAll ? [] : cidrs;
    this.allowLocalhost = family === "IPv4" && allowIPv4Localhost &&
      (this.matchAll || cidrs.some((c) => cidrContains(c, "127.0.0.1") || c.startsWith("127.")));
  }

  /** Returns true when a NodePort answers on `ip` (an address of this node). */
  contains(ip: string): boolean {
    if (ipFamily(ip) !== this.#family || ip.toLowerCase().startsWith("fe80:")) return false;
    if (isLoopback(ip) && !this.allowLocalhost) return false;
    return this.matchAll || this.cidrs.some((c) => cidrContains(c, ip));
  }

  /**
   * Returns the addresses among `local` (the node's own, from its interfaces) that NodePorts answer
   * on, in order, and the Node's primary address when it is one of them: the Node object names it
   * as this node's, so `render` on another machine writes what the node itself would.
   */
  nodeIPs(local: readonly string[]): string[] {
    const candidates = this.#primary === undefined ? local : [...local, this.#primary];
    return [...new Set(candidates.filter((ip) => this.contains(ip)))];
  }

  /** One string that changes whenever the answer of {@linkcode contains} may change. */
  toString(): string {
    return `${this.matchAll ? "all" : this.cidrs.join(",")}${this.allowLocalhost ? "+localhost" : ""}`;
  }
}
