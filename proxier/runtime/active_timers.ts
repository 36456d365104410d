/**
 * The timers the process holds, for the leak-hunting metric `nodejs_active_resources{type="Timeout"}`.
 * `node:process`'s getActiveResourcesInfo gives the same count, but importing it loads Deno's Node
 * compatibility layer: about 9 MiB of resident memory in a process that needs nothing else of it.
 * @module
 */

let active: Set<number> | undefined;

/**
 * Starts counting (once; later calls do nothing): from now on every timer set through the global
 * `setTimeout`/`setInterval` counts until it fires (timeouts) or is cleared. Timers set before the
 * first call are not counted, so the process calls it while it starts.
 */
export function countTimers(): void {
  if (active !== undefined) return;
  const held = active = new Set<number>();
  const g = globalThis as unknown as Record<string, (...a: unknown[]) => unknown>;
  const { setTimeout: setT, setInterval: setI, clearTimeout: clearT, clearInterval: clearI } = g;
  g.setTimeout = (handler: unknown, ...rest: unknown[]) => {
    if (typeof handler !== "function") return setT(handler, ...rest);
    const id = setT((...a: unknown[]) => {
      held.delete(id);
      return handler(...a);
    }, ...rest) as number;
    held.add(id);
    return id;
  };
  g.setInterval = (...args: unknown[]) => {
    const id = setI(...args) as number;
    held.add(id);
    return id;
  };
  // Either clear function clears either kind of timer, as in browsers and Deno.
  g.clearTimeout = (id: unknown) => (held.delete(id as number), clearT(id));
  g.clearInterval = (id: unknown) => (held.delete(id as number), clearI(id));
}

/** The timers held now (see {@linkcode countTimers}); 0 before counting starts. */
export function activeTimers(): number {
  return active?.size ?? 0;
}
