/**
 * `kube-proxy-deno render`: what a full sync of a mode would apply for the objects of a file source,
 * computed by the real proxier on a dry-run executor; touches nothing on the node.
 * @module
 */
import { type CommandContext, EXIT, type ExitCode } from "../../command_definition.ts";
import { renderFileSource } from "../../read_side/render.ts";
import { addressClaims, claimText } from "../../read_side/claims.ts";
import type { RenderQuery } from "./flags.ts";

/**
 * Prints the batches a full sync would apply on stdout (exactly them), the live proxy's warnings
 * about skipped objects, the node addresses used and every address two Services claim on stderr.
 * @throws {CommandFailure} as `renderFileSource` does.
 */
export async function runRender(query: RenderQuery, r: CommandContext): Promise<ExitCode> {
  const rendered = await renderFileSource({
    mode: r.mode,
    config: r.config,
    log: r.log,
    nodeIPs: query.nodeIPs,
  });
  r.stdout(rendered.output);
  // Rules that depend on the node's addresses (NodePorts, a load balancer reaching itself) are only
  // as right as these: say which were used.
  r.log.info("Rendered for these node addresses", { addresses: rendered.renderer.nodeAddresses() });
  for (const view of rendered.renderer.explain.views()) {
    for (const claim of addressClaims(view)) {
      r.log.warn("Services claim the same address and port; one wins", {
        family: view.family,
        claim: claimText(claim),
      });
    }
  }
  return EXIT.ok;
}
