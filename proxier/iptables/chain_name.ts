/**
 * Upstream kube-proxy's per-service and per-endpoint chain names: a prefix plus the first 16
 * characters of the base32 (RFC 4648) SHA-256 of the service port name and protocol.
 * @module
 */
import { sha256Words } from "./sha256.ts";
import type { Chain } from "../../iptables/iptables.ts";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** Returns the first 16 base32 characters of SHA-256(`s`): its first 80 bits, 5 at a time. */
export function hashPrefix(s: string): string {
  const h = sha256Words(s);
  // 80 bits = words 0, 1 and the top half of word 2.
  const hi = h[0], mid = h[1], lo = h[2] >>> 16;
  let out = "";
  for (let i = 0; i < 16; i++) {
    const bit = i * 5; // offset of this 5-bit group in the 80 bits
    let v: number;
    if (bit + 5 <= 32) v = hi >>> (27 - bit);
    else if (bit < 32) v = (hi << (bit - 27)) | (mid >>> (59 - bit));
    else if (bit + 5 <= 64) v = mid >>> (59 - bit);
    else if (bit < 64) v = (mid << (bit - 59)) | (lo >>> (75 - bit));
    else v = lo >>> (75 - bit);
    out += ALPHABET[v & 31];
  }
  return out;
}

/** Per service port chain prefixes. */
export type ServiceChainPrefix = "KUBE-SVC-" | "KUBE-SVL-" | "KUBE-EXT-" | "KUBE-FW-";

/**
 * Returns the chain `prefix + hash(servicePortName + protocol)`, where `servicePortName` is
 * `ns/name[:port]` and `protocol` lower case, as upstream.
 */
export function servicePortChainName(
  prefix: ServiceChainPrefix,
  servicePortName: string,
  protocol: string,
): Chain {
  return prefix + hashPrefix(servicePortName + protocol.toLowerCase());
}

/** Returns `KUBE-SEP-` + hash(servicePortName + protocol + endpoint), endpoint as `ip:port`. */
export function endpointChainName(servicePortName: string, protocol: string, endpoint: string): Chain {
  return "KUBE-SEP-" + hashPrefix(servicePortName + protocol.toLowerCase() + endpoint);
}
