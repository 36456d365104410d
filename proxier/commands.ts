/**
 * The registry of commands: the one place that names them, as `modes.ts` is for modes. The command
 * line reads each command's flags and arguments through its definition, and `main.ts` runs the
 * chosen one; nothing else imports a command. A definition is light (help, flags, parsing): a
 * command's code is loaded when it runs, so the proxy never loads the read side's.
 * @module
 */
import type { CommandDefinition } from "./command_definition.ts";
import { explainCommand } from "./commands/explain/command.ts";
import { migrateCommand } from "./commands/migrate/command.ts";
import { renderCommand } from "./commands/render/command.ts";
import { proxyCommand } from "./commands/proxy/command.ts";
import { traceCommand } from "./commands/trace/command.ts";

/** The commands, in `--help`'s order; the first is the proxy, run when no command is named. */
export const COMMAND_NAMES = ["proxy", "explain", "trace", "migrate", "render"] as const;

/** One of {@linkcode COMMAND_NAMES}. */
export type CommandName = typeof COMMAND_NAMES[number];

/** Each command's definition, typed by the one command list: a command without one does not compile. */
const BY_NAME: Readonly<Record<CommandName, CommandDefinition>> = {
  proxy: proxyCommand,
  explain: explainCommand,
  trace: traceCommand,
  migrate: migrateCommand,
  render: renderCommand,
};

/** Every command, by name, in `--help`'s order. */
export const COMMANDS: ReadonlyMap<CommandName, CommandDefinition> = new Map(
  COMMAND_NAMES.map((n) => [n, BY_NAME[n]]),
);

/** The command run when the first argument names none: the proxy itself. */
export const DEFAULT_COMMAND: CommandDefinition = COMMANDS.get(COMMAND_NAMES[0])!;
