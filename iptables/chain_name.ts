/**
 * Upstream kube-proxy's per-service and per-endpoint chain names: a prefix plus the first 16
 * characters of the base32 (RFC 4648) SHA-256 of the service port name and protocol.
 * @module
 */
import { createHash } from "node:crypto";
import type { Chain } from "./iptables.ts";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** Returns the first 16 base32 characters of SHA-256(`s`) (80 bits: 10 bytes). */
export function hashPrefix(s: string): string {
  const digest = createHash("sha256").update(s).digest();
  let out = "";
  let bits = 0;
  let value = 0;
  for (let i = 0; out.length < 16; i++) {
    value = (value << 8) | digest[i];
    bits += 8;
    while (bits >= 5 && out.length < 16) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
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
