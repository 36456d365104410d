/**
 * How the proxy's phases fail: a {@linkcode CommandFailure} said as an error log line (an operator
 * reads the proxy's log, as upstream's `"Error running ProxyServer"`), exit 1 unless told otherwise.
 * @module
 */
import { CommandFailure, EXIT, type ExitCode } from "../../command_definition.ts";
import type { Fields } from "../../runtime/logger.ts";

/** Returns the failure of a proxy phase: `message` and `fields` logged once by the program's exit path. */
export function proxyFailure(
  message: string,
  fields?: Fields,
  cause?: unknown,
  code: ExitCode = EXIT.failed,
): CommandFailure {
  return new CommandFailure(code, message, { asLog: true, fields, cause });
}
