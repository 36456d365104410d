/**
 * The `sync-generation` set's one element: the number of the last transaction this process applied,
 * commented with the writer (the running proxy's identity). Every transaction rewrites it, so the
 * drift check finds a transaction nft said it applied but the kernel does not hold, and names
 * another instance of this program that wrote the table since.
 * @module
 */
import { ANOTHER_WRITER } from "../drift.ts";
import type { NftElement } from "../../iptables/nft.ts";

/** The element of transaction `generation` by `writer` (none for `render`), as nft lists a mark. */
export function generationElement(generation: number, writer?: string): string {
  const mark = `0x${generation.toString(16).padStart(8, "0")}`;
  return writer === undefined ? mark : `${mark} comment "kube-proxy-deno ${writer}"`;
}

/**
 * Says the other instance of this program whose element `listed` holds (not `writer`'s); undefined
 * when it holds none or ours.
 */
export function otherWriterOf(listed: readonly NftElement[], writer: string | undefined): string | undefined {
  const other = listed.map((e) => /^kube-proxy-deno (.+)$/.exec(e.comment ?? "")?.[1]).find((w) =>
    w !== undefined
  );
  return other === undefined || other === writer
    ? undefined
    : `${ANOTHER_WRITER}: kube-proxy-deno ${other} wrote transaction ${Number(listed[0].key[0])}`;
}
