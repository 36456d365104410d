/**
 * Which kernel tools this node has: each mode names the tools it runs and what stops working
 * without each (`ToolNeed`), and the start checks them once on `PATH`.
 * @module
 */
import type { Logger } from "./logger.ts";

/**
 * A kernel tool a mode runs, and what stops working without it; `C` is the configuration that
 * decides whether it is needed.
 */
export interface ToolNeed<C = unknown> {
  readonly tool: string;
  /** True: the mode cannot run without it. */
  readonly required: boolean;
  /** What an operator loses without it (for optional tools), or what it does (required ones). */
  readonly without: string;
  /** Set: only needed when this holds for the configuration (e.g. portals enabled). */
  readonly when?: (config: C) => boolean;
}

/** Returns true when an executable file `name` is in one of `path`'s directories. */
export async function onPath(name: string, path: string | undefined): Promise<boolean> {
  for (const dir of (path ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
    if (dir === "") continue;
    try {
      const info = await Deno.stat(`${dir}/${name}`);
      if (info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0) return true;
    } catch { /* not here */ }
  }
  return false;
}

/**
 * Returns the tools of `needs` that apply to `config` and that `found` does not find, each once,
 * logging one line per missing optional tool saying what stops working. Required ones are for
 * the caller to report (the mode cannot start).
 */
export async function checkTools<C>(
  needs: readonly ToolNeed<C>[],
  config: C,
  found: (tool: string) => Promise<boolean>,
  log: Logger,
): Promise<ToolNeed<C>[]> {
  const missing: ToolNeed<C>[] = [];
  for (const n of needs) {
    if (n.when !== undefined && !n.when(config)) continue;
    if (missing.some((m) => m.tool === n.tool) || await found(n.tool)) continue;
    missing.push(n);
    if (!n.required) log.warn(`${n.tool} is not installed: ${n.without}`, { tool: n.tool });
  }
  return missing;
}

/**
 * Returns what is missing for `mode` (and the process's own tools) on `path`: the message naming the
 * mode and the tools, and each tool with what it is needed for; undefined when nothing required is.
 */
export async function missingModeTools<C>(
  mode: { readonly name: string; readonly tools: readonly ToolNeed<C>[] },
  process: readonly ToolNeed<C>[],
  config: C,
  path: string | undefined,
  log: Logger,
): Promise<{ readonly message: string; readonly fields: { readonly tools: string[] } } | undefined> {
  const missing = await checkTools([...process, ...mode.tools], config, (t) => onPath(t, path), log);
  const required = missing.filter((m) => m.required);
  if (required.length === 0) return undefined;
  return {
    message: `${mode.name} mode cannot run: ${required.map((m) => m.tool).join(", ")} not found on PATH`,
    fields: { tools: required.map((m) => `${m.tool}: ${m.without}`) },
  };
}
