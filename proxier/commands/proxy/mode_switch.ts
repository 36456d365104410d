/**
 * What a start does to the modes it takes the node over from: the modes that write the same chains
 * go before the first sync, the others once it is in, and a datapath that alone carries connections
 * (ipvs) is kept for them until they are gone or the drain time is over.
 * @module
 */
import type { Executor } from "../../../iptables/executor.ts";
import type { ModeDrain, ProxyModeDefinition } from "../../mode_definition.ts";
import type { Clock } from "../../runtime/clock.ts";
import { onAbort } from "../../runtime/abort.ts";
import type { Logger } from "../../runtime/logger.ts";
import { cleanupModes } from "./cleanup.ts";

/** What a start does to the modes it takes the node over from (the server runs the two steps). */
export interface ModeSwitch {
  /** Before the first sync: the modes that write the chains this one is about to write. */
  beforeFirstSync(): Promise<void>;
  /** Once the first sync is in the kernel: the other modes' rules, but a datapath kept to drain. */
  afterFirstSync(): Promise<void>;
  /**
   * After that: each datapath kept for its connections (ipvs), removed once they are gone or
   * `drainMs` has passed. New connections are this mode's from its first sync on; no established
   * one loses its path before that.
   */
  drain(signal: AbortSignal): Promise<void>;
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
      await cleanupModes(early, o.exec, o.log, {
        interfaceIPs: o.nodeIPs,
        keep,
        draining: new Set(drains.keys()),
      });
    },
    async afterFirstSync() {
      await cleanupModes(others.filter((m) => !early.includes(m)), o.exec, o.log, {
        interfaceIPs: o.nodeIPs,
        keep,
        draining: new Set(drains.keys()),
      });
    },
    async drain(signal) {
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
