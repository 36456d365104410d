/**
 * The one reading of `--nodeport-addresses` for every mode, as upstream's
 * `pkg/proxy/util/nodeport_addresses.go` with `cmd/kube-proxy`'s resolution of its keywords (1.37:
 * combinable with each other and with CIDRs):
 * - CIDRs of this family restrict NodePorts to the node's addresses inside them;
 * - `primary` is the Node's primary address of this family (its first InternalIP, else ExternalIP);
 *   `localhost` is 127.0.0.0/8 and ::1/128; `all` is 0.0.0.0/0 and ::/0;
 * - no CIDR of this family (nothing configured, only the other family's, or `primary` while the
 *   Node's address is unknown) means every address of the node, as upstream's `0.0.0.0/0`;
 * - loopback addresses answer only in IPv4, and only where the mode allows it
 *   (`--iptables-localhost-nodeports`); IPv6 link-local addresses never do. A mode that serves
 *   loopback NodePorts through a socket proxy (nftables) asks {@linkcode explicitLoopback}.
 * @module
 */
import { cidrContains, hostPrefix, ipFamily, isLoopback } from "./net.ts";
import type { IPFamily } from "./types.ts";

/** The `--nodeport-addresses` keyword meaning the node's primary IPs (upstream 1.29+). */
export const NODE_PORT_PRIMARY = "primary";
/** The `--nodeport-addresses` keyword meaning the loopback addresses (upstream 1.37+). */
export const NODE_PORT_LOCALHOST = "localhost";
/** The `--nodeport-addresses` keyword meaning every address (upstream 1.37+). */
export const NODE_PORT_ALL = "all";
/** The keywords `--nodeport-addresses` takes beside CIDRs. */
export const NODE_PORT_KEYWORDS: readonly string[] = [NODE_PORT_PRIMARY, NODE_PORT_LOCALHOST, NODE_PORT_ALL];

/** The CIDRs each keyword but `primary` stands for. */
const KEYWORD_CIDRS: Readonly<Record<string, readonly string[]>> = {
  [NODE_PORT_LOCALHOST]: ["127.0.0.0/8", "::1/128"],
  [NODE_PORT_ALL]: ["0.0.0.0/0", "::/0"],
};

/** Where NodePorts answer for one IP family; see the module doc. */
export class NodePortAddresses {
  /** This family's CIDRs, `primary` resolved; empty when {@linkcode matchAll}. */
  readonly cidrs: readonly string[];
  /** Every address of the node answers (no CIDR of this family applies). */
  readonly matchAll: boolean;
  /** IPv4 loopback addresses answer too (only when the mode allows and the CIDRs include them). */
  readonly allowLocalhost: boolean;
  /**
   * A configured CIDR other than a whole family (`all`, `0.0.0.0/0`) holds this family's loopback
   * address (127.0.0.1 or ::1): upstream's explicit request for localhost NodePorts.
   */
  readonly explicitLoopback: boolean;
  readonly #family: IPFamily;
  readonly #primary?: string;

  /**
   * Reads `configured` (`--nodeport-addresses`: CIDRs of both families and keywords) for `family`;
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
    let primaryUnknown = false;
    const cidrs = configured.flatMap((c) => {
      if (c !== NODE_PORT_PRIMARY) {
        return (KEYWORD_CIDRS[c] ?? [c]).filter((x) => ipFamily(x.split("/")[0]) === family);
      }
      // A loopback primary address is upstream's stand-in for an unknown one.
      if (primaryIP !== undefined && ipFamily(primaryIP) === family && !isLoopback(primaryIP)) {
        return [primaryIP + hostPrefix(primaryIP)];
      }
      primaryUnknown = true;
      return [];
    });
    const whole = (c: string) => /^(0\.0\.0\.0|::)\/0$/.test(c);
    this.matchAll = cidrs.length === 0 || primaryUnknown || cidrs.some(whole);
    const loopback = family === "IPv4" ? "127.0.0.1" : "::1";
    this.explicitLoopback = cidrs.some((c) => !whole(c) && cidrContains(c, loopback));
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
