/**
 * A mode's rules rendered from objects: what a full sync of the mode would apply for the objects of a
 * file source (or the API's, listed once), computed by the real proxier on a dry-run executor; touches
 * nothing on the node. `render` prints them; `explain`, `trace` and `migrate` trace them.
 * @module
 */
import { DryRunExecutor } from "../../iptables/dry_run.ts";
import { CommandFailure, EXIT } from "../command_definition.ts";
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
 * source's one Node (`sources/file_node.ts`); returns them.
 * @throws {CommandFailure} usage without a file source, for a mode without render, or without one
 * node to act for; failed when a source file cannot be read or does not parse (naming the file and line).
 */
export async function renderFileSource(
  o: Pick<RenderRun, "mode" | "config" | "log" | "nodeIPs"> & {
    /** Only the objects this accepts are warned about (default: all, as a running proxy does). */
    readonly warnAbout?: (key: string, o: object) => boolean;
  },
): Promise<Rendered> {
  const { config } = o;
  if (config.source.kind !== "file") throw new CommandFailure(EXIT.usage, "needs --source=file:PATH");
  const path = config.source.path;
  const nodeName = await fileNode(path, config.hostnameOverride);
  return await renderObjects({
    ...o,
    nodeName,
    load: (handler, log) => new FileSource({ path, nodeName, handler, log, strict: true }).load(),
  });
}

/**
 * Returns the node a file source's objects are rendered for: `--hostname-override`'s, else the
 * source's one Node (which endpoints are local, and the node's addresses, are the node's: never
 * guessed).
 * @throws {CommandFailure} failed when the source cannot be read or does not parse, usage without
 * one node to act for.
 */
export async function fileNode(path: string, hostnameOverride: string): Promise<string> {
  let nodes;
  try {
    nodes = await sourceNodeNames(path);
  } catch (e) {
    throw new CommandFailure(EXIT.failed, `--source: ${(e as Error).message}`, { cause: e });
  }
  const chosen = fileSourceNode(nodes, hostnameOverride);
  if ("error" in chosen) throw new CommandFailure(EXIT.usage, chosen.error);
  return chosen.node;
}

/**
 * Builds `mode`'s proxiers on a dry run for node `nodeName`, feeds them what `load` gives (a file
 * source's objects, or the API's listed once) and syncs once; returns them.
 * @throws {CommandFailure} usage for a mode without render, failed when `load` fails.
 */
export async function renderObjects(
  o: Pick<RenderRun, "mode" | "config" | "log" | "nodeIPs"> & {
    readonly nodeName: string;
    readonly load: (handler: ModeRenderer["handler"], log: Logger) => Promise<void>;
    readonly warnAbout?: (key: string, o: object) => boolean;
  },
): Promise<Rendered> {
  const { mode, config, nodeName } = o;
  if (mode.render === undefined) {
    throw new CommandFailure(EXIT.usage, `--proxy-mode: not supported in mode "${mode.name}"`);
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
    if (e instanceof CommandFailure) throw e;
    throw new CommandFailure(EXIT.failed, `--source: ${(e as Error).message}`, { cause: e });
  }
  return { renderer, nodeName, output: await renderer.render() };
}
