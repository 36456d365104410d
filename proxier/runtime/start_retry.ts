/**
 * A mode's start steps probe the kernel tools (`nft --version`, a layout check, iptables' backend),
 * and a step that fails ends the program with a message, as upstream's. A tool that ran and failed
 * may have failed for a moment (a lock, a busy netlink, a wrapper being upgraded): that step gets
 * more tries before the node loses its proxy; a missing tool or a refused platform does not.
 * @module
 */
import { ExecError } from "../../iptables/executor.ts";
import { ModeUnavailableError } from "./errors.ts";
import type { Clock } from "./clock.ts";
import type { Logger } from "./logger.ts";

/** Tries per start step when a tool ran and failed. */
export const START_ATTEMPTS = 3;
/** The pause between them. */
export const START_RETRY_MS = 1000;

/** True when a tool ran and failed somewhere in `e`'s causes (it did start: not a missing tool). */
function toolRanAndFailed(e: unknown): boolean {
  for (let x: unknown = e, depth = 0; x instanceof Error && depth < 8; x = x.cause, depth++) {
    if (x instanceof ExecError && x.code >= 0) return true;
  }
  return false;
}

/**
 * Resolves with `step`'s result; a {@linkcode ModeUnavailableError} caused by a tool that ran and
 * failed is retried ({@linkcode START_ATTEMPTS} tries, {@linkcode START_RETRY_MS} apart, each said
 * in the log). Anything else, and the last failure, rejects as it came.
 */
export async function retryStart<T>(
  what: string,
  step: () => Promise<T>,
  o: { log: Logger; clock: Clock },
): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await step();
    } catch (e) {
      if (!(e instanceof ModeUnavailableError) || !toolRanAndFailed(e) || attempt >= START_ATTEMPTS) throw e;
      o.log.warn("A start step failed; trying again", { step: what, attempt, error: e.message });
      await new Promise<void>((resolve) => o.clock.setTimer(resolve, START_RETRY_MS));
    }
  }
}
