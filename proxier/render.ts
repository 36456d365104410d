/**
 * `kube-proxy-deno render`: what a full sync of a mode would apply for the objects of a file source,
 * computed by the real proxier on a dry-run executor; touches nothing on the node.
 * @module
 */
import { DryRunExecutor } from "../iptables/dry_run.ts";
import { newModeDeps, type ProxyModeDefinition } from "./mode_definition.ts";
import type { ProxyConfig } from "./options/config.ts";
import { realClock } from "./runtime/clock.ts";
import { type Logger, warningsOnly } from "./runtime/logger.ts";
import { FileSource } from "./sources/file.ts";

/** What {@linkcode runRender} is given. */
export interface RenderRun {
  readonly mode: ProxyModeDefinition;
  readonly config: ProxyConfig;
  readonly log: Logger;
  /** `--node-ip`: the rendered node's addresses; undefined takes the Node object's from the source. */
  readonly nodeIPs?: readonly string[];
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/**
 * Prints the batches a full sync would apply on stdout (exactly them), the live proxy's warnings
 * about skipped objects and the node addresses used on stderr. Returns the exit code: 2 without a
 * file source or for a mode without render, 1 when the source cannot be read.
 */
export async function runRender(r: RenderRun): Promise<number> {
  const { mode, config } = r;
  if (config.source.kind !== "file") {
    r.stderr("kube-proxy-deno: render needs --source=file:PATH\n");
    return 2;
  }
  if (mode.render === undefined) {
    r.stderr(`kube-proxy-deno: --proxy-mode: render does not support mode "${mode.name}"\n`);
    return 2;
  }
  const dryRun = new DryRunExecutor();
  const nodeName = config.hostnameOverride || "render";
  const log = warningsOnly(r.log);
  const deps = newModeDeps(config, {
    nodeName,
    log,
    clock: realClock,
    exec: dryRun,
    renderNodeIPs: r.nodeIPs,
  });
  const renderer = await mode.render(deps, dryRun);
  try {
    await new FileSource({ path: config.source.path, nodeName, handler: renderer.handler, log }).load();
  } catch (e) {
    r.stderr(`kube-proxy-deno: --source: ${(e as Error).message}\n`);
    return 1;
  }
  r.stdout(await renderer.render());
  // Rules that depend on the node's addresses (NodePorts, a load balancer reaching itself) are only
  // as right as these: say which were used.
  r.stderr(`kube-proxy-deno: render: node addresses: ${renderer.nodeAddresses()}\n`);
  return 0;
}
