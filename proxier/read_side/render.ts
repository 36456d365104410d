/**
 * A mode's rules rendered from objects: what a full sync of the mode would apply for the objects of a
 * file source (or the API's, listed once), computed by the real proxier on a dry-run executor; touches
 * nothing on the node. `render` prints them; `explain`, `trace` and `migrate` trace them.
 * @module
 */
import { DryRunExecutor } from "../../iptables/dry_run.ts";
import { type ModeRenderer, newModeDeps, type ProxyModeDefinition } from "../mode_definition.ts";
import type { ProxyConfig } from "../options/config.ts";
import { realClock } from "../runtime/clock.ts";
import { type Logger, warningsOnly } from "../runtime/logger.ts";
import { FileSource } from "../sources/file.ts";
import { fileSourceNode, sourceNodeNames } from "../sources/file_node.ts";

/** What a render is given. */
export interface RenderRun {
  readonly mode: ProxyModeDefinition;
  readonly config: ProxyConfig;
  readonly log: Logger;
  /** `--node-ip`: the rendered node's addresses; undefined takes the Node object's from the source. */
  readonly nodeIPs?: readonly string[];
}

/** A mode's proxiers rendered over the file source's objects. */
export interface Rendered {
  readonly renderer: ModeRenderer;
  /** The node the render stands for (`--hostname-override`, else the source's one Node). */
  readonly nodeName: string;
  /** The batches a full sync would apply, each under a heading. */
  readonly output: string;
}

/**
 * Builds `mode`'s proxiers on a dry run, feeds them the file source's objects and syncs once (as
 * `render` and offline `explain` and `trace` do), for the node `--hostname-override` names, else the
 * source's one Node (`sources/file_node.ts`); returns them, or the error and the exit code: 2 without
 * a file source, for a mode without render, or without one node to act for; 1 when a source file
 * cannot be read or does not parse (naming the file and line).
 */
export async function renderFileSource(
  o: Pick<RenderRun, "mode" | "config" | "log" | "nodeIPs"> & {
    /** Only the objects this accepts are warned about (default: all, as a running proxy does). */
    readonly warnAbout?: (key: string, o: object) => boolean;
  },
): Promise<Rendered | { readonly error: string; readonly code: 1 | 2 }> {
  const { mode, config } = o;
  if (config.source.kind !== "file") return { error: "needs --source=file:PATH", code: 2 };
  if (mode.render === undefined) {
    return { error: `--proxy-mode: not supported in mode "${mode.name}"`, code: 2 };
  }
  let nodes;
  try {
    nodes = await sourceNodeNames(config.source.path);
  } catch (e) {
    return { error: `--source: ${(e as Error).message}`, code: 1 };
  }
  // Which endpoints are local, and the node's addresses, are the node's: never guessed.
  const chosen = fileSourceNode(nodes, config.hostnameOverride);
  if ("error" in chosen) return { error: chosen.error, code: 2 };
  const nodeName = chosen.node;
  const path = config.source.path;
  return await renderObjects({
    ...o,
    nodeName,
    load: (handler, log) => new FileSource({ path, nodeName, handler, log, strict: true }).load(),
  });
}

/**
 * Builds `mode`'s proxiers on a dry run for node `nodeName`, feeds them what `load` gives (a file
 * source's objects, or the API's listed once) and syncs once; returns them, or exit 1 with the
 * error when `load` fails.
 */
export async function renderObjects(
  o: Pick<RenderRun, "mode" | "config" | "log" | "nodeIPs"> & {
    readonly nodeName: string;
    readonly load: (handler: ModeRenderer["handler"], log: Logger) => Promise<void>;
    readonly warnAbout?: (key: string, o: object) => boolean;
  },
): Promise<Rendered | { readonly error: string; readonly code: 1 | 2 }> {
  const { mode, config, nodeName } = o;
  if (mode.render === undefined) {
    return { error: `--proxy-mode: not supported in mode "${mode.name}"`, code: 2 };
  }
  const dryRun = new DryRunExecutor();
  const log = warningsOnly(o.log);
  const deps = newModeDeps(config, {
    nodeName,
    log,
    clock: realClock,
    exec: dryRun,
    renderNodeIPs: o.nodeIPs,
    warnAbout: o.warnAbout,
  });
  const renderer = await mode.render(deps, dryRun);
  try {
    await o.load(renderer.handler, log);
  } catch (e) {
    return { error: `--source: ${(e as Error).message}`, code: 1 };
  }
  return { renderer, nodeName, output: await renderer.render() };
}
