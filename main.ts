/**
 * kube-proxy-deno: the entry point. The only module that reads `Deno.args` and `Deno.env`; it parses
 * the command line, answers `--help`, `--version` and `--write-config-to`, and runs the chosen
 * command through the registry. It names no mode and no command.
 * @module
 */
import { UsageError } from "./proxier/runtime/errors.ts";
import { commandContext } from "./proxier/cli/context.ts";
import { type CommandLine, parseCommandLine } from "./proxier/cli/command_line.ts";
import { flushLogging, setupLogging } from "./proxier/runtime/logger.ts";
import { writeText } from "./proxier/runtime/output.ts";
import { VERSION } from "./proxier/runtime/version.ts";

/**
 * Runs the program; returns the exit code. `stop` (for embedders such as the demo) ends a running
 * proxy as SIGTERM does.
 */
export async function main(argv: readonly string[], opts: { stop?: AbortSignal } = {}): Promise<number> {
  let line: CommandLine;
  try {
    line = parseCommandLine(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    writeText(Deno.stderr, `kube-proxy-deno: ${e.message}\nRun 'kube-proxy-deno --help' for usage.\n`);
    return 2;
  }
  if (line.action === "help") {
    const { usageOf } = await import("./proxier/cli/usage.ts");
    writeText(Deno.stdout, usageOf(line.command));
    return 0;
  }
  if (line.action === "version") {
    writeText(Deno.stdout, `kube-proxy-deno ${VERSION}\n`);
    return 0;
  }
  const { config } = line;
  const log = await setupLogging(config.logging.format, config.logging.verbosity);
  for (const w of [...line.warnings, ...config.features.warnings]) log.warn(w);
  if (line.action === "write-config") {
    const { writeConfigFile } = await import("./proxier/options/write_config.ts");
    return await writeConfigFile(line.facts.kubeProxyConfiguration, line.writeConfigTo!, log);
  }
  if (config.source.kind === "file") {
    try {
      await Deno.stat(config.source.path);
    } catch (e) {
      const path = JSON.stringify(config.source.path);
      writeText(Deno.stderr, `kube-proxy-deno: --source: ${path}: ${(e as Error).message}\n`);
      return 2;
    }
  }
  const context = commandContext(line, { env: (name) => Deno.env.get(name), log, stop: opts.stop });
  return await line.command.run(line.query, context);
}

if (import.meta.main) {
  const code = await main(Deno.args);
  await flushLogging();
  Deno.exit(code);
}
