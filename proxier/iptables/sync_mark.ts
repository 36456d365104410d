/**
 * The sync mark: the last rule of nat KUBE-POSTROUTING, a comment naming the sync that wrote it
 * and the writer (the running proxy's identity), after the MASQUERADE no packet passes. Every
 * restore rewrites it, so the drift check finds a restore that exited 0 having done nothing, and
 * names another instance of this program that wrote the chain since. Living in upstream's chain,
 * it goes with upstream's first restore or cleanup, and a rollback leaves nothing of ours.
 * @module
 */
import { KUBE_POSTROUTING } from "./rules.ts";

/** The rule of sync `generation` by `writer` (none for `render`, which stands for no process). */
export function syncMarkRule(generation: number, writer?: string): string {
  const by = writer === undefined ? "" : ` by ${writer}`;
  return `-A ${KUBE_POSTROUTING} -m comment --comment "kube-proxy-deno sync ${generation}${by}"`;
}

/**
 * Returns the writer another instance of this program left in `rules` (nat KUBE-POSTROUTING as
 * listed), when the last sync mark is not `writer`'s; undefined when none is there or it is ours.
 */
export function otherWriter(rules: readonly string[], writer: string | undefined): string | undefined {
  for (const r of [...rules].reverse()) {
    const m = /"kube-proxy-deno sync \d+ by ([^"]+)"/.exec(r);
    if (m !== null) return m[1] === writer ? undefined : m[1];
  }
  return undefined;
}
