/**
 * What `--cleanup` does, and what a start does to other modes' leftovers: every mode's (and upstream
 * kube-proxy's same mode's) kernel objects removed in both families, each mode through its own
 * `cleanup` (`proxier/<mode>/cleanup.ts`), in registry order.
 * @module
 */
import { ExecError, type Executor } from "../../../iptables/executor.ts";
import type { ModeDrain, ProxyModeDefinition } from "../../mode_definition.ts";
import type { Clock } from "../../runtime/clock.ts";
import { onAbort } from "../../runtime/abort.ts";
import type { Logger } from "../../runtime/logger.ts";

/**
 * Removes the kernel objects of every mode in `modes` but `keep` (all of them with `--cleanup`), in
 * both families. With `keep` (a start), chain names modes share are removed only where the other
 * mode's own chains show it ran; a mode in `draining` keeps its datapath. A tool that is not installed has nothing to clean; any other
 * failure is logged and the rest still runs. Returns false when something failed.
 */
export async function cleanupModes(
  modes: Iterable<ProxyModeDefinition>,
  exec: Executor,
  log: Logger,
  keep?: ProxyModeDefinition,
  draining: ReadonlySet<ProxyModeDefinition> = new Set(),
): Promise<boolean> {
  let ok = true;
  const all = [...modes];
  for (const family of ["IPv4", "IPv6"] as const) {
    for (const mode of all) {
      if (mode === keep) continue;
      try {
        await mode.cleanup(exec, family, {
          everything: keep === undefined,
          keepDatapath: draining.has(mode),
        });
      } catch (e) {
        if (e instanceof ExecError && e.code === -1) continue; // the tool is not installed
        ok = false;
        log.error("Cleanup failed", { mode: mode.name, family, error: (e as Error).message });
      }
    }
  }
  return ok;
}

/** `--cleanup`: every mode's kernel objects, in both families; returns the exit code (1: something failed). */
export async function runCleanup(
  modes: Iterable<ProxyModeDefinition>,
  exec: Executor,
  log: Logger,
): Promise<number> {
  const ok = await cleanupModes(modes, exec, log);
  log.info("Cleanup done", { ok });
  return ok ? 0 : 1;
}

/** What a start does to the modes it takes the node over from (`main.ts` runs the two steps). */
export interface ModeSwitch {
  /** Before the first sync: the modes that write the chains this one is about to write. */
  beforeFirstSync(): Promise<void>;
  /**
   * Once the first sync is in the kernel: the other modes' rules, then each datapath kept for its
   * connections (ipvs) once they are gone or `drainMs` has passed. New connections are this mode's
   * from its first sync on; no established one loses its path before that.
   */
  afterFirstSync(signal: AbortSignal): Promise<void>;
}

/** How often a drain looks at the connections it waits for. */
const DRAIN_POLL_MS = 2000;

/** Returns the switch from whatever programs the node to `keep`; see {@linkcode ModeSwitch}. */
export function modeSwitch(
  modes: Iterable<ProxyModeDefinition>,
  keep: ProxyModeDefinition,
  o: { exec: Executor; log: Logger; clock: Clock; drainMs: number; nodeIPs: readonly string[] },
): ModeSwitch {
  const others = [...modes].filter((m) => m !== keep);
  const early = others.filter((m) => m.sharesKubeChains === true && keep.sharesKubeChains === true);
  const drains = new Map<ProxyModeDefinition, ModeDrain>();
  return {
    async beforeFirstSync() {
      // Taken before anything of a mode goes: it names the mode's datapath.
      if (o.drainMs > 0) {
        for (const m of others) {
          const d = await m.drain?.(o.exec, o.nodeIPs).catch(() => undefined);
          if (d !== undefined) drains.set(m, d);
        }
      }
      await cleanupModes(early, o.exec, o.log, keep, new Set(drains.keys()));
    },
    async afterFirstSync(signal) {
      await cleanupModes(
        others.filter((m) => !early.includes(m)),
        o.exec,
        o.log,
        keep,
        new Set(drains.keys()),
      );
      for (const [m, d] of drains) {
        const deadline = o.clock.now() + o.drainMs;
        let left = await d.connections().catch(() => 0);
        if (left > 0) {
          o.log.info("Keeping the previous mode's datapath for its connections", {
            mode: m.name,
            connections: left,
            atMostMs: o.drainMs,
          });
        }
        while (left > 0 && o.clock.now() < deadline && !signal.aborted) {
          await new Promise<void>((resolve) => {
            let off = () => {};
            const cancel = o.clock.setTimer(
              () => (off(), resolve()),
              Math.min(DRAIN_POLL_MS, deadline - o.clock.now()),
            );
            off = onAbort(signal, () => (cancel(), resolve()));
          });
          left = await d.connections().catch(() => 0);
        }
        if (signal.aborted) return;
        if (left > 0) {
          o.log.warn("Drain time over; cutting the connections left", { mode: m.name, connections: left });
        }
        await d.finish();
        o.log.info("Removed the previous mode's datapath", { mode: m.name });
      }
    },
  };
}
