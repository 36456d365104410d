/**
 * Reacting to an abort signal that may already have fired: `addEventListener("abort")` never calls
 * back for a signal aborted before the call, so a SIGTERM during start-up would leave a watcher or a
 * wait open and the process running.
 * @module
 */

/**
 * Runs `fn` once when `signal` aborts, at once when it already has. Returns a function that
 * removes the registration (a no-op once `fn` ran).
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) {
    fn();
    return () => {};
  }
  signal.addEventListener("abort", fn, { once: true });
  return () => signal.removeEventListener("abort", fn);
}
