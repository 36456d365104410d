/**
 * Which kernel tools work on this node, probed once at start by the modes that need them.
 * @module
 */
import type { Executor } from "../iptables/executor.ts";
import { IptablesRunner } from "../iptables/iptables.ts";
import type { Logger } from "./logger.ts";
import type { IPFamily } from "./types.ts";

/**
 * Returns an iptables runner for `family` when we are root and `iptables-save` works (logging the
 * version, which names the backend), else undefined (logging why).
 */
export async function probeIptables(
  exec: Executor,
  log: Logger,
  family: IPFamily,
): Promise<IptablesRunner | undefined> {
  if (Deno.uid() !== 0) return undefined;
  const ipt = new IptablesRunner({ exec, family });
  try {
    const version = await ipt.version();
    await ipt.save("nat");
    log.info("Using iptables", { family, version });
    return ipt;
  } catch (e) {
    log.warn("iptables is not usable", { family, error: (e as Error).message });
    return undefined;
  }
}
