/**
 * The proxy, in upstream's ProxyServer phases, each a file: build (`build.ts`: everything checked
 * and built before the node is touched), platform setup (`platform_setup.ts`: conntrack, the mode's
 * set-up, its provider), the source (`source.ts`: the API or the file over the provider), and the
 * run (`run.ts`: status servers, signals, the mode switch, the sync loop, teardown). A phase fails by
 * throwing; the program's exit path says it once. A daemon feature lands in its phase's file.
 * @module
 */
import { EXIT, type ExitCode } from "../../command_definition.ts";
import type { CommandContext } from "../../command_definition.ts";
import { buildProxyServer } from "./build.ts";
import type { ProxyQuery } from "./flags.ts";
import { createProvider, platformSetup } from "./platform_setup.ts";
import { runProxy } from "./run.ts";
import { openSource } from "./source.ts";

/**
 * Runs the proxy (or, with `initOnly`, only its privileged set-up); returns the exit code. Nothing
 * touches the node until the configuration, the kernel tools and the API access have been
 * validated: a run that exits for a configuration error leaves the node as it was.
 * @throws {CommandFailure} from the phase that failed.
 */
export async function runProxyServer(query: ProxyQuery, c: CommandContext): Promise<ExitCode> {
  const server = await buildProxyServer(query, c);
  await platformSetup(server);
  if (query.initOnly) {
    c.log.info("System initialized and --init-only flag set; exiting");
    return EXIT.ok;
  }
  const source = openSource(server);
  const provider = await createProvider(server);
  return await runProxy(server, provider, source);
}
