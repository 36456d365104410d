/**
 * The Linux kernel's `jhash` (Bob Jenkins' lookup3, `include/linux/jhash.h`) and nftables' use of
 * it (`nft_hash.c`: `reciprocal_scale(jhash(data, len, seed), modulus)`), in TypeScript, so a
 * connection's hash slot can be told without the kernel: by `trace`, by the Maglev tables' tests
 * and bench. A real-kernel test (`tests/e2e/jhash_test.ts`) holds it to what nft computes.
 * @module
 */

/** lookup3's initial value. */
const JHASH_INITVAL = 0xdeadbeef;

const rol = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;

/** Reads 4 bytes little-endian (the kernel's `__get_unaligned_cpu32` on x86 and arm64). */
const u32le = (k: Uint8Array, i: number) =>
  (k[i] | (k[i + 1] << 8) | (k[i + 2] << 16) | (k[i + 3] << 24)) >>> 0;

/** Returns `jhash(key, key.length, initval)` as the kernel computes it (an unsigned 32-bit value). */
export function jhash(key: Uint8Array, initval: number): number {
  let length = key.length;
  let a = (JHASH_INITVAL + length + initval) >>> 0;
  let b = a;
  let c = a;
  let i = 0;
  while (length > 12) {
    a = (a + u32le(key, i)) >>> 0;
    b = (b + u32le(key, i + 4)) >>> 0;
    c = (c + u32le(key, i + 8)) >>> 0;
    // __jhash_mix
    a = (a - c) >>> 0, a = (a ^ rol(c, 4)) >>> 0, c = (c + b) >>> 0;
    b = (b - a) >>> 0, b = (b ^ rol(a, 6)) >>> 0, a = (a + c) >>> 0;
    c = (c - b) >>> 0, c = (c ^ rol(b, 8)) >>> 0, b = (b + a) >>> 0;
    a = (a - c) >>> 0, a = (a ^ rol(c, 16)) >>> 0, c = (c + b) >>> 0;
    b = (b - a) >>> 0, b = (b ^ rol(a, 19)) >>> 0, a = (a + c) >>> 0;
    c = (c - b) >>> 0, c = (c ^ rol(b, 4)) >>> 0, b = (b + a) >>> 0;
    length -= 12;
    i += 12;
  }
  if (length === 0) return c;
  // The last 1..12 bytes, each added at its little-endian place.
  const at = (n: number) => key[i + n];
  if (length >= 12) c = (c + (at(11) << 24)) >>> 0;
  if (length >= 11) c = (c + (at(10) << 16)) >>> 0;
  if (length >= 10) c = (c + (at(9) << 8)) >>> 0;
  if (length >= 9) c = (c + at(8)) >>> 0;
  if (length >= 8) b = (b + (at(7) << 24)) >>> 0;
  if (length >= 7) b = (b + (at(6) << 16)) >>> 0;
  if (length >= 6) b = (b + (at(5) << 8)) >>> 0;
  if (length >= 5) b = (b + at(4)) >>> 0;
  if (length >= 4) a = (a + (at(3) << 24)) >>> 0;
  if (length >= 3) a = (a + (at(2) << 16)) >>> 0;
  if (length >= 2) a = (a + (at(1) << 8)) >>> 0;
  a = (a + at(0)) >>> 0;
  // __jhash_final
  c = (c ^ b) >>> 0, c = (c - rol(b, 14)) >>> 0;
  a = (a ^ c) >>> 0, a = (a - rol(c, 11)) >>> 0;
  b = (b ^ a) >>> 0, b = (b - rol(a, 25)) >>> 0;
  c = (c ^ b) >>> 0, c = (c - rol(b, 16)) >>> 0;
  a = (a ^ c) >>> 0, a = (a - rol(c, 4)) >>> 0;
  b = (b ^ a) >>> 0, b = (b - rol(a, 14)) >>> 0;
  c = (c ^ b) >>> 0, c = (c - rol(b, 24)) >>> 0;
  return c;
}

/** Returns the kernel's `reciprocal_scale(value, n)`: `value * n >> 32`, in `[0, n)`. */
export function reciprocalScale(value: number, n: number): number {
  return Number((BigInt(value) * BigInt(n)) >> 32n);
}

/**
 * Returns the slot nft's `jhash <fields> mod n seed s` gives for `fields`: each field in network
 * byte order, padded with zeros to 4 bytes as nft lays a concatenation into registers.
 */
export function nftJhash(fields: readonly Uint8Array[], n: number, seed: number): number {
  const len = fields.reduce((sum, f) => sum + Math.ceil(f.length / 4) * 4, 0);
  const data = new Uint8Array(len);
  let off = 0;
  for (const f of fields) {
    data.set(f, off);
    off += Math.ceil(f.length / 4) * 4;
  }
  return reciprocalScale(jhash(data, seed), n);
}

/** A port number as the 2 bytes a packet carries. */
export function portBytes(port: number): Uint8Array {
  return Uint8Array.of(port >> 8, port & 255);
}
