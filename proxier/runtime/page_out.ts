/**
 * Giving back the program's own code pages the start alone used: the runtime's binary (V8, the module
 * loader, the start-up snapshot) is mapped from its file, and a start touches far more of it than a
 * running proxy executes again. The kernel reclaims clean file pages only under memory pressure, so
 * until then they count in the proxy's resident memory. `MADV_PAGEOUT` (Linux 5.4+) asks it to reclaim
 * them now; whatever the proxy executes again is read back from the file on its next use. Nothing
 * written is touched: only the binary's read-only segments (code, constants).
 * @module
 */
import { LIBC_PATHS } from "./gc.ts";

/** `madvise(2)` advice: reclaim these pages now (clean file pages are simply dropped). */
const MADV_PAGEOUT = 21;
/** `getauxval(3)` keys: the program headers of the executable and their count. */
const AT_PHDR = 3n, AT_PHNUM = 5n;
/** ELF program header types and flags. */
const PT_LOAD = 1, PT_PHDR = 6, PF_W = 2;
/** The size of an ELF64 program header. */
const PHDR_SIZE = 56;
const PAGE = 4096n;

type Libc = Deno.DynamicLibrary<{
  getauxval: { parameters: ["u64"]; result: "u64" };
  memcpy: { parameters: ["buffer", "usize", "usize"]; result: "pointer" };
  madvise: { parameters: ["usize", "usize", "i32"]; result: "i32" };
}>;

/** glibc, opened at the first page-out; null when unavailable (not glibc, no FFI permission). */
let libc: Libc | null | undefined;

function openLibc(): Libc | null {
  for (const path of LIBC_PATHS) {
    try {
      return Deno.dlopen(path, {
        getauxval: { parameters: ["u64"], result: "u64" },
        memcpy: { parameters: ["buffer", "usize", "usize"], result: "pointer" },
        madvise: { parameters: ["usize", "usize", "i32"], result: "i32" },
      });
    } catch {
      // Not this architecture's path, not glibc, or no FFI permission.
    }
  }
  return null;
}

/** One ELF program header, as far as this reads it. */
export interface ProgramHeader {
  readonly type: number;
  readonly flags: number;
  readonly vaddr: bigint;
  readonly memsz: bigint;
}

/** Reads `count` ELF64 program headers (little-endian) from `bytes`. */
export function parseProgramHeaders(bytes: Uint8Array, count: number): ProgramHeader[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Array.from({ length: count }, (_, i) => ({
    type: dv.getUint32(i * PHDR_SIZE, true),
    flags: dv.getUint32(i * PHDR_SIZE + 4, true),
    vaddr: dv.getBigUint64(i * PHDR_SIZE + 16, true),
    memsz: dv.getBigUint64(i * PHDR_SIZE + 40, true),
  }));
}

/**
 * Returns the page-aligned address ranges of the executable's read-only loaded segments, given its
 * program headers and where they are mapped (`phdrAddress`, whose own header gives the load bias).
 */
export function readOnlySegments(
  headers: readonly ProgramHeader[],
  phdrAddress: bigint,
): Array<{ start: bigint; length: bigint }> {
  const self = headers.find((h) => h.type === PT_PHDR);
  if (self === undefined) return [];
  const bias = phdrAddress - self.vaddr;
  return headers.filter((h) => h.type === PT_LOAD && (h.flags & PF_W) === 0).map((h) => {
    const start = (bias + h.vaddr) / PAGE * PAGE;
    const end = (bias + h.vaddr + h.memsz + PAGE - 1n) / PAGE * PAGE;
    return { start, length: end - start };
  });
}

/**
 * Asks the kernel to reclaim the executable's read-only pages now (see the module doc); returns the
 * bytes advised, 0 where it cannot (no glibc, no FFI permission, a kernel without MADV_PAGEOUT).
 */
export function pageOutProgramText(): number {
  libc ??= openLibc();
  if (libc === null) return 0;
  const phdr = BigInt(libc.symbols.getauxval(AT_PHDR));
  const count = Number(libc.symbols.getauxval(AT_PHNUM));
  if (phdr === 0n || count === 0) return 0;
  const bytes = new Uint8Array(count * PHDR_SIZE);
  libc.symbols.memcpy(bytes, phdr, BigInt(bytes.length));
  let advised = 0;
  for (const s of readOnlySegments(parseProgramHeaders(bytes, count), phdr)) {
    if (libc.symbols.madvise(s.start, s.length, MADV_PAGEOUT) === 0) advised += Number(s.length);
  }
  return advised;
}
