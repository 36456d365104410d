/**
 * The command line, as upstream's `cmd/kube-proxy/app/options.go` reads it: without `--config` the
 * flags (`flag_table.ts`) fill in a defaulted KubeProxyConfiguration; with it the file does, and only
 * the logging flags, `--hostname-override`, `--master` and the process flags still apply (the others
 * are named in one warning). Then upstream's platform defaults and validation, and the command: the
 * first argument names it (the registry, `commands.ts`, knows each one's flags and arguments), else
 * it is the proxy.
 * @module
 */
import { UsageError } from "../runtime/errors.ts";
import type { CommandDefinition, CommandLineFacts } from "../command_definition.ts";
import { COMMANDS, DEFAULT_COMMAND } from "../commands.ts";
import type { ProxyConfig, ProxyMode } from "../options/config.ts";
import { decodeConfigFile } from "../options/config_file.ts";
import { ACTING_FEATURES } from "../options/feature_gates.ts";
import { FLAG_BY_NAME, type FlagContext, type FlagDef, FLAGS } from "../options/flag_table.ts";
import {
  appendPortIfNeeded,
  defaultKubeProxyConfiguration,
  defaultOwnFlags,
  HEALTHZ_PORT,
  isZeroQuantity,
  type KubeProxyConfiguration,
  METRICS_PORT,
  modeSection,
  periodFlagPrefix,
  platformDefaults,
  setDefaults,
  toProxyConfig,
} from "../options/kube_proxy_configuration.ts";
import { type FlagUse, parseBool, scanArgs } from "../options/pflag.ts";
import { type FieldError, validate } from "../options/validation.ts";
import { parseNodeName } from "../options/values.ts";

/** What the command line asks for. */
export interface CommandLine {
  /** Run the command, or only print the help or the version, or write the configuration file. */
  readonly action: "run" | "help" | "version" | "write-config";
  /** The command named by the first argument, else the proxy. */
  readonly command: CommandDefinition;
  /** True when the first argument named the command (`render --help` is render's help). */
  readonly named: boolean;
  /** What the command reads from its arguments (for `action: "run"`). */
  readonly query: unknown;
  /** What the program runs with. */
  readonly config: ProxyConfig;
  /** The configuration the command line gives, for `mode` instead of its own (`migrate` compares two). */
  readonly configFor: (mode: ProxyMode) => ProxyConfig;
  /** What the proxy's pages and start need beyond the configuration. */
  readonly facts: CommandLineFacts;
  /** `--write-config-to`'s path. */
  readonly writeConfigTo?: string;
  /** Non-fatal remarks to log once logging is set up (flags ignored because of --config, unknown fields). */
  readonly warnings: string[];
}

/** Every command's own flags, each name once (commands that share a flag share its definition's shape). */
const COMMAND_FLAGS: ReadonlyMap<string, FlagDef> = new Map(
  [...COMMANDS.values()].flatMap((c) => c.flags.map((f) => [f.name, f] as const)),
);

/** The commands a first argument may name, for its error. */
const NAMED = [...COMMANDS.values()].filter((c) => c !== DEFAULT_COMMAND).map((c) => c.name);

/** Joins names as a sentence does: `a, b and c`. */
const sentence = (names: readonly string[], last = "and") =>
  names.join(", ").replace(/, ([^,]*)$/, ` ${last} $1`);

/**
 * Parses the command line (without the program name) into the configuration to run with and the
 * command to run.
 * @throws {UsageError} for any unknown flag or bad value; the message names both.
 */
export function parseCommandLine(
  argv: readonly string[],
  readFile: (path: string) => string = Deno.readTextFileSync,
  stat: (path: string) => unknown = Deno.statSync,
): CommandLine {
  const { flags, positionals } = scanArgs(argv, [...FLAGS, ...COMMAND_FLAGS.values()]);
  const given = (name: string) => flags.findLast((f) => f.name === name)?.value;
  const first = positionals[0];
  const named = first !== undefined;
  const command = named
    ? [...COMMANDS.values()].find((c) => c.name === first && c !== DEFAULT_COMMAND)
    : DEFAULT_COMMAND;
  if (command === undefined) {
    throw new UsageError(
      `unknown command ${JSON.stringify(first)} (${sentence(NAMED.map((n) => JSON.stringify(n)), "or")})`,
    );
  }
  const args = positionals.slice(named ? 1 : 0);
  if (args.length > command.maxPositionals) {
    throw new UsageError(
      `${command.name}: unexpected argument ${
        JSON.stringify(args[command.maxPositionals])
      } (${command.positionalsSay})`,
    );
  }
  const misplaced = flags.find((f) =>
    COMMAND_FLAGS.has(f.name) && !command.flags.some((d) => d.name === f.name)
  );
  if (misplaced !== undefined) {
    const takers = [...COMMANDS.values()].filter((c) => c.flags.some((d) => d.name === misplaced.name));
    throw new UsageError(
      `--${misplaced.name}: only the ${sentence(takers.map((c) => c.name))} command${
        takers.length > 1 ? "s take" : " takes"
      } it`,
    );
  }
  const help = bool(given, "help");
  // `trace --help` explains trace; its flags need not be complete for that.
  const givenAll = (name: string) => flags.filter((f) => f.name === name).map((f) => f.value);
  const query = help ? undefined : command.parse({ positionals: args, given, givenAll });
  const configFile = given("config");
  const writeConfigTo = given("write-config-to");
  const warnings: string[] = [];
  const fromFile = configFile !== undefined;
  let configText = "";
  // With --config the file replaces the flags' defaults (defaulted as upstream's decoding does).
  const ctx: FlagContext = {
    v: fromFile
      ? readConfigFile(configFile, readFile, warnings, (text) => configText = text)
      : defaultKubeProxyConfiguration(),
    own: defaultOwnFlags(),
    late: new Map(),
    healthzPort: HEALTHZ_PORT,
    metricsPort: METRICS_PORT,
    notes: warnings,
  };
  const proxyFlags = flags.filter((f) => !COMMAND_FLAGS.has(f.name));
  if (fromFile) {
    const ignored = [
      ...new Set(proxyFlags.filter((f) => !FLAG_BY_NAME.get(f.name)!.withConfig).map((f) => `--${f.name}`)),
    ];
    if (ignored.length > 0) warnings.push(`--config is set: ignoring flags ${ignored.join(", ")}`);
  }
  for (const f of proxyFlags) {
    const def = FLAG_BY_NAME.get(f.name)!;
    if (fromFile && !def.withConfig) continue;
    def.apply?.(ctx, f.value);
  }
  if (!fromFile) applyLate(ctx, writeConfigTo !== undefined);
  // Upstream's processHostnameOverrideFlag: the flag wins over the file; empty means unset.
  const hostname = given("hostname-override");
  if (hostname !== undefined && hostname !== "") {
    if (hostname.trim() === "") {
      throw new UsageError("--hostname-override: empty hostname-override is invalid");
    }
    ctx.v.hostnameOverride = parseNodeName("--hostname-override", hostname);
  } else if (fromFile && ctx.v.hostnameOverride !== "") {
    ctx.v.hostnameOverride = parseNodeName(
      `--config: ${configFile}: hostnameOverride`,
      ctx.v.hostnameOverride,
    );
  }
  const modeChosen = ctx.v.mode !== "";
  const given0 = structuredClone(ctx.v);
  const v = platformDefaults(ctx.v);
  const errors = validate(v);
  if (errors.length > 0) throw new UsageError(errors.map((e) => describe(e, v, configFile)).join("; "));
  const config = toProxyConfig(v, ctx.own);
  const version = given("version");
  const action = help
    ? "help"
    : version !== undefined && version !== "false"
    ? "version"
    : writeConfigTo !== undefined
    ? "write-config"
    : "run";
  if (action === "run") checkSourcePath(config, stat);
  return {
    action,
    command,
    named,
    query,
    config,
    configFor: (mode) => toProxyConfig(platformDefaults({ ...structuredClone(given0), mode }), ctx.own),
    facts: {
      kubeProxyConfiguration: v,
      flagValues: FLAGS.map((f) => [`--${f.name}`, given(f.name) ?? f.default]),
      configFile: configFile === undefined ? undefined : { path: configFile, text: configText },
      notApplying: notApplying(config, v.featureGates, proxyFlags),
      modeChosen,
    },
    writeConfigTo,
    warnings,
  };
}

/** Reads and decodes the `--config` file, defaulted; its unknown fields go to `warnings`, its text to `read`. */
function readConfigFile(
  path: string,
  readFile: (path: string) => string,
  warnings: string[],
  read: (text: string) => void,
): KubeProxyConfiguration {
  let text: string;
  try {
    text = readFile(path);
  } catch (e) {
    throw new UsageError(`--config: cannot read ${JSON.stringify(path)}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  read(text);
  const decoded = decodeConfigFile(text, path);
  warnings.push(...decoded.warnings);
  return setDefaults(decoded.config);
}

/**
 * A `--source=file:` path that does not exist is a bad flag, refused before any command runs (every
 * command that reads the source would otherwise fail later, some after touching the node).
 * @throws {UsageError} naming the flag, the path and why.
 */
function checkSourcePath(config: ProxyConfig, stat: (path: string) => unknown): void {
  if (config.source.kind !== "file") return;
  try {
    stat(config.source.path);
  } catch (e) {
    throw new UsageError(`--source: ${JSON.stringify(config.source.path)}: ${(e as Error).message}`, {
      cause: e,
    });
  }
}

function bool(given: (name: string) => string | undefined, name: string): boolean {
  const s = given(name);
  return s !== undefined && parseBool(`--${name}`, s);
}

/**
 * What upstream's `processV1Alpha1Flags` and `Complete` do after the flags: the sync-period flags of
 * the mode in use (upstream starts every mode from iptables' defaulted periods), and the deprecated
 * port flags joined to their addresses.
 */
function applyLate(c: FlagContext, writing: boolean): void {
  const flag = periodFlagPrefix(c.v.mode);
  const sync = c.late.get(`${flag}-sync-period`) ?? c.v.iptables.syncPeriod;
  const min = c.late.get(`${flag}-min-sync-period`) ?? c.v.iptables.minSyncPeriod;
  const section = c.v[modeSection(c.v.mode)];
  section.syncPeriod = sync;
  section.minSyncPeriod = min;
  if (!writing) {
    c.v.healthzBindAddress = c.healthzPort === 0
      ? ""
      : appendPortIfNeeded(c.v.healthzBindAddress, c.healthzPort);
    c.v.metricsBindAddress = c.metricsPort === 0
      ? ""
      : appendPortIfNeeded(c.v.metricsBindAddress, c.metricsPort);
  }
}

/** A validation error, naming the file and field, or the flag that set the field. */
function describe(e: FieldError, v: KubeProxyConfiguration, configFile?: string): string {
  if (configFile !== undefined) return `--config: ${configFile}: ${e.field}: ${e.message}`;
  const section = modeSection(v.mode);
  const periodFlag = periodFlagPrefix(v.mode);
  const flag = e.field === `${section}.syncPeriod`
    ? `${periodFlag}-sync-period`
    : e.field === `${section}.minSyncPeriod`
    ? `${periodFlag}-min-sync-period`
    : FLAGS.find((f) => f.field !== undefined && e.field.replace(/\[\d+\]$/, "") === f.field)?.name;
  return `${flag === undefined ? e.field : `--${flag}`}: ${e.message}`;
}

/** Each setting given that has no effect here, with why (named once at start). */
function notApplying(
  c: ProxyConfig,
  gates: Readonly<Record<string, boolean>>,
  flags: readonly FlagUse[],
): string[] {
  const out: string[] = [];
  for (const name of new Set(flags.map((f) => f.name))) {
    const why = FLAG_BY_NAME.get(name)!.notApplying;
    if (why !== undefined) out.push(`--${name} does not apply: ${why}`);
  }
  if (c.enableProfiling) {
    out.push(
      `profiling (--profiling, enableProfiling) does not apply: upstream serves Go's pprof; this program has no profiler`,
    );
  }
  const inert = Object.entries(gates).filter(([k]) => !ACTING_FEATURES.includes(k));
  if (inert.length > 0) {
    out.push(
      `featureGates ${inert.map(([k, v]) => `${k}=${v}`).join(",")} do not apply: of upstream's gates ` +
        `only ${ACTING_FEATURES.join(", ")} change what this program does`,
    );
  }
  if (c.showHiddenMetricsForVersion !== "") {
    out.push("showHiddenMetricsForVersion does not apply: this program hides no metric");
  }
  const win = c.winkernel;
  if (
    c.windowsRunAsService || win.networkName !== "" || win.sourceVip !== "" || win.enableDSR ||
    win.rootHnsEndpointName !== "" || win.forwardHealthCheckVip
  ) {
    out.push("winkernel and windowsRunAsService are Windows-only; ignored on Linux");
  }
  const lg = c.logging;
  if (lg.vmodule.length > 0) out.push("logging.vmodule (--vmodule) does not apply: --v filters every record");
  if (lg.textSplitStream || lg.jsonSplitStream) {
    out.push("logging split streams (--log-*-split-stream) do not apply: every record goes to stderr");
  }
  if (!isZeroQuantity(lg.textInfoBufferSize) || !isZeroQuantity(lg.jsonInfoBufferSize)) {
    out.push(
      "logging info buffer sizes (--log-*-info-buffer-size) do not apply: records are written at once",
    );
  }
  return out;
}
