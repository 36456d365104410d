/**
 * How a read-side command reaches the API server: the context's access (kubeconfig, `--master`,
 * in-cluster), with a kubeconfig it cannot use turned into bad input, said through the one exit path.
 * @module
 */
import { type CommandContext, CommandFailure, EXIT } from "../command_definition.ts";
import { KubeconfigError } from "../runtime/errors.ts";
import type { ApiAccess } from "../sources/api_access.ts";

/**
 * Returns the API access `context` gives.
 * @throws {CommandFailure} usage, naming what `why` needs the API for and what is wrong with the kubeconfig.
 */
export async function readSideApiAccess(
  context: Pick<CommandContext, "apiAccess">,
  why: string,
): Promise<ApiAccess> {
  try {
    return await context.apiAccess();
  } catch (e) {
    if (!(e instanceof KubeconfigError)) throw e;
    throw new CommandFailure(EXIT.usage, `${why}: ${e.message}`, { cause: e });
  }
}
