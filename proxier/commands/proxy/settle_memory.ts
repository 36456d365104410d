/**
 * What the proxy gives back as it starts: once the program is loaded, the code pages only loading
 * touched; once its first sync is in the kernel and the other modes' leftovers are gone, the start's
 * garbage (every object listed, the first full batch, what the cleanup read) with malloc's free
 * memory, and the code pages only the start executed (`runtime/page_out.ts`); and how many malloc
 * arenas its threads may hold. A running proxy's memory
 * is then what it keeps, not what starting took.
 * @module
 */
import { collectGarbage } from "../../runtime/gc.ts";
import type { Logger } from "../../runtime/logger.ts";
import { pageOutProgramText } from "../../runtime/page_out.ts";

/** glibc malloc arenas the proxy's threads share (`runtime/gc.ts` limitMallocArenas). */
export const MALLOC_ARENAS = 2;

/**
 * Gives back the code pages loading the program touched (the module loader, compiling every module,
 * reading the configuration), before the first lists arrive: the first sync then builds its objects
 * on a smaller base, so the process's peak is lower. What the sync executes is read back from the
 * file as it runs. Logs (at verbosity 2) how much code it asked the kernel to reclaim.
 */
export function settleLoading(log: Logger): void {
  const advised = pageOutProgramText();
  log.debug("Gave back what loading the program used", { codeMiB: Math.round(advised / 2 ** 20) }, 2);
}

/**
 * Runs `cleanup` (the other modes' leftovers, read whole where they exist) once the first sync's
 * garbage is collected, so the two never add up, then gives back what the start alone used: what
 * the cleanup read with the rest. Logs (at verbosity 2) how much code it asked the kernel to reclaim.
 */
export async function settleMemory(log: Logger, cleanup: () => Promise<void>): Promise<void> {
  collectGarbage();
  await cleanup();
  collectGarbage({ thorough: true });
  const advised = pageOutProgramText();
  log.debug("Gave back what the start alone used", { codeMiB: Math.round(advised / 2 ** 20) }, 2);
}
