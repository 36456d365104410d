/**
 * A changed `--config` file ends the program, as upstream's does ("content of the proxy server's
 * configuration file was updated", exit 1), so the DaemonSet or systemd starts it again with the new
 * file: no setting is applied live. Unlike upstream, the content decides: rewriting the same bytes
 * (kubelet re-projecting an unchanged ConfigMap, an editor saving without a change) ends nothing, and
 * a ConfigMap update, which kubelet makes by swapping the `..data` symlink beside the file rather than
 * by writing it, is noticed (a watch of the file alone misses it).
 * @module
 */
import { type Clock, realClock } from "../runtime/clock.ts";
import { onAbort } from "../runtime/abort.ts";

/** What {@linkcode watchConfigFile} is given. */
export interface ConfigWatch {
  /** The `--config` path as given (a symlink is followed at each read). */
  readonly path: string;
  /** The text the running configuration was read from. */
  readonly text: string;
  /** Ends the watch. */
  readonly signal: AbortSignal;
  /** Called once, when the file reads differently from `text`. */
  readonly onChange: () => void;
  /** Times the settling of a burst of events; default the real clock. */
  readonly clock?: Clock;
}

/** How long the directory must be quiet before the file is read again (a write in several parts). */
export const CONFIG_SETTLE_MS = 100;

/**
 * Watches the directory of `path` until `signal` aborts or the content changed (checked once as the
 * watch starts, then after each burst of events); then calls `onChange` once and ends. A file that
 * cannot be read (gone for a moment) changes nothing.
 */
export async function watchConfigFile(o: ConfigWatch): Promise<void> {
  const clock = o.clock ?? realClock;
  const slash = o.path.lastIndexOf("/");
  const dir = slash < 0 ? "." : slash === 0 ? "/" : o.path.slice(0, slash);
  const watcher = Deno.watchFs(dir, { recursive: false });
  const stop = () => watcher.close();
  onAbort(o.signal, stop);
  let cancel = () => {};
  let changed = false;
  const check = async () => {
    const text = await Deno.readTextFile(o.path).catch(() => undefined);
    if (changed || text === undefined || text === o.text) return;
    changed = true;
    o.onChange();
    stop();
  };
  // What changed between the configuration's read and the watch's start made no event here.
  void check();
  try {
    for await (const _ of watcher) {
      cancel();
      cancel = clock.setTimer(() => void check(), CONFIG_SETTLE_MS);
    }
  } finally {
    cancel();
    o.signal.removeEventListener("abort", stop);
  }
}
