/**
 * `kube-proxy-deno render`: what a full sync of a mode would apply for the objects of a file source,
 * computed by the real proxier on a dry-run executor; touches nothing on the node.
 * @module
 */
import type { CommandContext } from "../../command_definition.ts";
import { renderFileSource } from "../../read_side/render.ts";
import type { RenderQuery } from "./flags.ts";

/**
 * Prints the batches a full sync would apply on stdout (exactly them), the live proxy's warnings
 * about skipped objects and the node addresses used on stderr. Returns the exit code: 2 without a
 * file source or for a mode without render, 1 when the source cannot be read.
 */
export async function runRender(query: RenderQuery, r: CommandContext): Promise<number> {
  const rendered = await renderFileSource({
    mode: r.mode,
    config: r.config,
    log: r.log,
    nodeIPs: query.nodeIPs,
  });
  if ("error" in rendered) {
    r.stderr(`kube-proxy-deno: render: ${rendered.error}\n`);
    return rendered.code;
  }
  r.stdout(rendered.output);
  // Rules that depend on the node's addresses (NodePorts, a load balancer reaching itself) are only
  // as right as these: say which were used.
  r.stderr(`kube-proxy-deno: render: node addresses: ${rendered.renderer.nodeAddresses()}\n`);
  return 0;
}
