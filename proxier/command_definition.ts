/**
 * The command contract: what a command provides to the program (its help, its own flags, how it
 * reads its arguments, how it runs) and what every command is given to run with (the
 * {@linkcode CommandContext}, built once by the command line). The registry (`commands.ts`) lists
 * the commands; each lives in its folder under `commands/`. A command ends in one of the exit codes
 * defined here ({@linkcode EXIT}) or fails by throwing a {@linkcode CommandFailure}; `main.ts` alone
 * prints a failure and exits.
 * @module
 */
import type { Executor } from "../iptables/executor.ts";
import type { ProxyModeDefinition } from "./mode_definition.ts";
import type { ProxyConfig, ProxyMode } from "./options/config.ts";
import type { FlagDef } from "./options/flag_table.ts";
import type { KubeProxyConfiguration } from "./options/kube_proxy_configuration.ts";
import type { Fields, Logger } from "./runtime/logger.ts";
import type { ApiAccess } from "./sources/api_access.ts";

declare const exitCode: unique symbol;
/** A process exit code: one of {@linkcode EXIT}'s, never a literal (a literal does not type-check). */
export type ExitCode = number & { readonly [exitCode]: true };

/**
 * The program's exit codes, the one table every command ends in (kubectl's `cmdutil` code table).
 * The comparing commands (`explain`, `migrate`) read 1 and 3 as their answer; each command's help
 * says what each code means for it ({@linkcode CommandDefinition.exits}).
 */
export const EXIT = {
  /** Done; for a comparison, everything was checked and nothing differs. */
  ok: 0 as ExitCode,
  /** Failed (something could not be read, started or reached); for a comparison, something differs. */
  failed: 1 as ExitCode,
  /** Bad input: a flag, an argument, a configuration or a file that names nothing to act on. */
  usage: 2 as ExitCode,
  /** A comparison found nothing that differs, but something could not be checked (each named, with why). */
  notChecked: 3 as ExitCode,
} as const;

/** Returns a comparison's exit code for `differs` things that differ and `unchecked` that could not be checked. */
export function comparisonExit(differs: number, unchecked: number): ExitCode {
  return differs > 0 ? EXIT.failed : unchecked > 0 ? EXIT.notChecked : EXIT.ok;
}

/**
 * How a command fails: thrown anywhere below its `run`, printed once by `main.ts` (as
 * `kube-proxy-deno: COMMAND: message` on stderr, or as a log line for the proxy, whose operators read
 * its log) and turned into the exit code.
 */
export class CommandFailure extends Error {
  /** The exit code the program ends with. */
  readonly code: ExitCode;
  /** Structured fields of the log line, when the failure is said as one. */
  readonly fields?: Fields;
  /** True when the failure is said as an error log line (the proxy's), not a line on stderr. */
  readonly asLog: boolean;

  /** @param message names what failed (a flag, a file and line, an address) and why. */
  constructor(
    code: ExitCode,
    message: string,
    options?: ErrorOptions & { readonly fields?: Fields; readonly asLog?: boolean },
  ) {
    super(message, options);
    this.name = "CommandFailure";
    this.code = code;
    this.fields = options?.fields;
    this.asLog = options?.asLog ?? false;
  }
}

/** What `--help` and the flag reference say of a command. */
export interface CommandHelp {
  /** How it is called, after the program's name: `explain NAMESPACE/NAME [flags]`. */
  readonly synopsis: string;
  /** One line, for the general `--help`. */
  readonly summary: string;
  /** What it does, for `COMMAND --help`. */
  readonly about: string;
  /** The proxy's flags that shape what the command reads or renders (as the running proxy takes them). */
  readonly related: readonly string[];
}

/** What each exit code means for one command, in code order (`--help` and the README print it). */
export type ExitMeanings = ReadonlyArray<readonly [code: ExitCode, means: string]>;

/** A command's arguments, as the command line scanned them. */
export interface CommandArgs {
  /** The positional arguments after the command's own name. */
  readonly positionals: readonly string[];
  /** A flag's value as last given; undefined when it is not given. */
  given(flag: string): string | undefined;
  /** Every value a flag was given, in order (a flag a command takes more than once). */
  givenAll(flag: string): string[];
}

/** One command of the program. `Q` is what it reads from its arguments. */
export interface CommandDefinition<Q = unknown> {
  /** Its name: the first argument that asks for it (the default command is asked for by none). */
  readonly name: string;
  /** Absent for the default command, which `--help` describes as the program itself. */
  readonly help?: CommandHelp;
  /** What each exit code it can end in means for it. */
  readonly exits: ExitMeanings;
  /** The flags it takes of its own (beside the proxy's flags, which every command reads). */
  readonly flags: readonly FlagDef[];
  /** At most this many positional arguments after its name; `positionalsSay` names them for an error. */
  readonly maxPositionals: number;
  readonly positionalsSay: string;
  /**
   * Reads its arguments into what it runs.
   * @throws {UsageError} naming the flag or argument that is wrong.
   */
  parse(args: CommandArgs): Q;
  /**
   * Runs it; returns the exit code it ends in.
   * @throws {CommandFailure} when it cannot do what was asked, with the code and what failed.
   */
  run(query: Q, context: CommandContext): Promise<ExitCode>;
}

/** What the command line gives beyond the configuration, for the proxy's own pages and start. */
export interface CommandLineFacts {
  /** The same settings in upstream's format (`/configz`). */
  readonly kubeProxyConfiguration: KubeProxyConfiguration;
  /** Every proxy flag with its value as given, else its default (`/flagz`). */
  readonly flagValues: ReadonlyArray<readonly [name: string, value: string]>;
  /** `--config`, if given: its path and the text read (already merged into the configuration). */
  readonly configFile?: { readonly path: string; readonly text: string };
  /** Settings given that do nothing in this program, each with why; named once at start. */
  readonly notApplying: readonly string[];
  /** True when the mode was chosen (`--proxy-mode`, the file's `mode:`), not left to its default. */
  readonly modeChosen: boolean;
}

/**
 * Everything a command runs with, built once (kubectl's Factory): the configuration, the modes, the
 * kernel tools' executor, the logger and output streams, this node's name and interface addresses,
 * and the API access.
 */
export interface CommandContext {
  readonly config: ProxyConfig;
  /** The configuration as the command line gives it, for `mode` instead of its own (its platform defaults). */
  readonly configFor: (mode: ProxyMode) => ProxyConfig;
  readonly facts: CommandLineFacts;
  /** Every mode this build runs, in `--cleanup` order. */
  readonly modes: ReadonlyMap<ProxyMode, ProxyModeDefinition>;
  /** The configured mode's definition. */
  readonly mode: ProxyModeDefinition;
  readonly exec: Executor;
  readonly log: Logger;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** This node's name: `--hostname-override`, else this machine's hostname in lower case (as upstream). */
  readonly nodeName: string;
  /** This machine's hostname as the kernel gives it (the Events' reporting instance). */
  readonly hostname: string;
  /**
   * This machine's interface addresses, both families, read when asked: the node's own, never the
   * service addresses the ipvs mode binds to kube-ipvs0.
   */
  interfaceAddresses(): readonly string[];
  /**
   * The API access the configuration gives (kubeconfig, `--master`, in-cluster).
   * @throws {KubeconfigError} naming what is wrong with it.
   */
  apiAccess(): Promise<ApiAccess>;
  /** `PATH`, where the kernel tools are looked for. */
  readonly toolPath: string | undefined;
  /** Ends a running proxy as SIGTERM does (for embedders such as the demo). */
  readonly stop?: AbortSignal;
}
