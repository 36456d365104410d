/**
 * The command contract: what a command provides to the program (its help, its own flags, how it
 * reads its arguments, how it runs) and what every command is given to run with (the
 * {@linkcode CommandContext}, built once by the command line). The registry (`commands.ts`) lists
 * the commands; each lives in its folder under `commands/`.
 * @module
 */
import type { Executor } from "../iptables/executor.ts";
import type { ProxyModeDefinition } from "./mode_definition.ts";
import type { ProxyConfig, ProxyMode } from "./options/config.ts";
import type { FlagDef } from "./options/flag_table.ts";
import type { KubeProxyConfiguration } from "./options/kube_proxy_configuration.ts";
import type { Logger } from "./runtime/logger.ts";
import type { ApiAccess } from "./sources/api_access.ts";

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
  /** Runs it; returns the exit code. */
  run(query: Q, context: CommandContext): Promise<number>;
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
  /** This machine's interface addresses, both families, read when asked. */
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
