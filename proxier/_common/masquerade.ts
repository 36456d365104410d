/**
 * The masquerade mark every kernel mode sets on packets to be SNATed (`--iptables-masquerade-bit`,
 * `nftables.masqueradeBit`; upstream's default bit 14 gives `0x4000`).
 * @module
 */

/**
 * Returns the mark of `bit` in hex as the kernel tools print it: `0x4000` (iptables, ipvs), or
 * zero-padded to `digits` hex digits (`0x00004000`, as `nft list` prints marks).
 */
export function masqueradeMark(bit: number, digits = 0): string {
  return `0x${(2 ** bit).toString(16).padStart(digits, "0")}`;
}
