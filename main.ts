/**
 * kube-proxy-deno: the entry point. The only module that reads `Deno.args` and `Deno.env`; it parses
 * the command line, answers `--help`, `--version` and `--write-config-to`, and runs the chosen
 * command through the registry. It names no mode and no command.
 * @module
 */
import { CommandFailure, EXIT, type ExitCode } from "./proxier/command_definition.ts";
import { UsageError } from "./proxier/runtime/errors.ts";
import { commandContext } from "./proxier/cli/context.ts";
import { type CommandLine, parseCommandLine } from "./proxier/cli/command_line.ts";
import { flushLogging, setupLogging } from "./proxier/runtime/logger.ts";
import { writeText } from "./proxier/runtime/output.ts";
import { VERSION } from "./proxier/runtime/version.ts";

/**
 * Runs the program; returns the exit code. `stop` (for embedders such as the demo) ends a running
 * proxy as SIGTERM does. The one exit path: every command's failure is said here, once.
 */
export async function main(argv: readonly string[], opts: { stop?: AbortSignal } = {}): Promise<ExitCode> {
  let line: CommandLine;
  try {
    line = parseCommandLine(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    writeText(Deno.stderr, `kube-proxy-deno: ${e.message}\nRun 'kube-proxy-deno --help' for usage.\n`);
    return EXIT.usage;
  }
  if (line.action === "help") {
    const { usageOf } = await import("./proxier/cli/usage.ts");
    writeText(Deno.stdout, usageOf(line.command));
    return EXIT.ok;
  }
  if (line.action === "version") {
    writeText(Deno.stdout, `kube-proxy-deno ${VERSION}\n`);
    return EXIT.ok;
  }
  const { config } = line;
  const log = await setupLogging(config.logging.format, config.logging.verbosity);
  for (const w of [...line.warnings, ...config.features.warnings]) log.warn(w);
  const context = commandContext(line, { env: (name) => Deno.env.get(name), log, stop: opts.stop });
  try {
    if (line.action === "write-config") {
      const { writeConfigFile } = await import("./proxier/options/write_config.ts");
      await writeConfigFile(line.facts.kubeProxyConfiguration, line.writeConfigTo!, log).catch((e) => {
        const fields = { file: line.writeConfigTo, error: (e as Error).message };
        throw new CommandFailure(EXIT.failed, "Cannot write the configuration", { asLog: true, fields });
      });
      return EXIT.ok;
    }
    return await line.command.run(line.query, context);
  } catch (e) {
    if (!(e instanceof CommandFailure)) throw e;
    // The proxy's operators read its log; a command's read its stderr, which names the command.
    if (e.asLog) log.error(e.message, e.fields);
    else {writeText(
        Deno.stderr,
        `kube-proxy-deno: ${line.named ? `${line.command.name}: ` : ""}${e.message}\n`,
      );}
    return e.code;
  }
}

if (import.meta.main) {
  const code = await main(Deno.args);
  await flushLogging();
  Deno.exit(code);
}
