/**
 * The command line, as upstream's `cmd/kube-proxy/app/options.go` reads it: without `--config` the
 * flags (`flag_table.ts`) fill in a defaulted KubeProxyConfiguration; with it the file does, and only
 * the logging flags, `--hostname-override`, `--master` and the process flags still apply (the others
 * are named in one warning). Then upstream's platform defaults and validation, and the command.
 * @module
 */
import { UsageError } from "../errors.ts";
import { parseTraceQuery } from "./trace_flags.ts";
import { parseExplainQuery } from "./explain_flags.ts";
import { parseMigrateQuery } from "./migrate_flags.ts";
import type { MigrateQuery } from "../commands/migrate/migrate.ts";
import type { ExplainQuery } from "../commands/explain/explain.ts";
import type { TraceQuery } from "../trace/packet.ts";
import type { ProxyConfig, ProxyMode } from "../options/config.ts";
import { decodeConfigFile } from "../options/config_file.ts";
import { ACTING_FEATURES } from "../options/feature_gates.ts";
import { FLAG_BY_NAME, type FlagCommand, type FlagContext, FLAGS } from "../options/flag_table.ts";
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
import { commandUsage, USAGE } from "./usage.ts";
import { type FieldError, validate } from "../options/validation.ts";
import { parseIPList, parseNodeName } from "../options/values.ts";

/** What the command line asks for. */
export interface ParsedCommand {
  readonly command:
    | "run"
    | "render"
    | "trace"
    | "explain"
    | "migrate"
    | "cleanup"
    | "init-only"
    | "write-config"
    | "version"
    | "help";
  /** Set for `trace`. */
  readonly trace?: TraceQuery;
  /** Set for `explain`. */
  readonly explain?: ExplainQuery;
  /** Set for `migrate`. */
  readonly migrate?: MigrateQuery;
  /** The configuration the command line gives, for `mode` instead of its own (`migrate` compares two). */
  readonly configFor: (mode: ProxyMode) => ProxyConfig;
  /** For `help`: the program's usage, or the command's (`render --help`). */
  readonly usage: string;
  /** `render --node-ip`: the node's addresses to render with (else the Node object's). */
  readonly renderNodeIPs?: readonly string[];
  /** What the program runs with. */
  readonly config: ProxyConfig;
  /** The same settings in upstream's format (`--write-config-to` writes it). */
  readonly kubeProxyConfiguration: KubeProxyConfiguration;
  /** `--write-config-to`'s path. */
  readonly writeConfigTo?: string;
  /** Non-fatal remarks to log once logging is set up (flags ignored because of --config, unknown fields). */
  readonly warnings: string[];
  /** Settings given that do nothing in this program, each with why; named once at start. */
  readonly notApplying: string[];
  /** `--config`, if given: its path and the text read (already merged into `config`). */
  readonly configFile?: { readonly path: string; readonly text: string };
  /** Every flag (but trace's) with its value as given, else its default: what `/flagz` lists. */
  readonly flagValues: ReadonlyArray<readonly [name: string, value: string]>;
}

/** The commands the first argument may name. */
const COMMANDS: readonly string[] = ["render", "trace", "explain", "migrate"];

/**
 * Said when the mode was left to its default, as upstream 1.37 (KEP-5343: the default moves to
 * nftables in 1.40). The wording is ours.
 */
export const DEFAULT_MODE_WARNING = "No proxy mode set (--proxy-mode, mode:): using iptables. Upstream's " +
  "default becomes nftables in Kubernetes 1.40; set the mode to keep iptables";

/**
 * Parses the command line (without the program name) into the configuration to run with.
 * @throws {UsageError} for any unknown flag or bad value; the message names both.
 */
export function parseCommandLine(argv: readonly string[], readFile = Deno.readTextFileSync): ParsedCommand {
  const { flags, positionals } = scanArgs(argv, FLAGS);
  const given = (name: string) => flags.findLast((f) => f.name === name)?.value;
  const command0 = positionals[0];
  if (command0 !== undefined && !COMMANDS.includes(command0)) {
    throw new UsageError(
      `unknown command ${JSON.stringify(command0)} ("render", "trace", "explain" or "migrate")`,
    );
  }
  // explain takes the Service's name.
  const maxPositionals = command0 === "explain" ? 2 : 1;
  if (positionals.length > maxPositionals) {
    throw new UsageError(
      `${command0}: unexpected argument ${JSON.stringify(positionals[maxPositionals])} (${
        command0 === "explain" ? "explain takes one NAMESPACE/NAME" : `${command0} takes flags only`
      })`,
    );
  }
  const help = bool(given, "help");
  // `trace --help` explains trace; its flags need not be complete for that.
  const trace = positionals[0] === "trace" && !help ? parseTraceQuery(given) : undefined;
  const misplaced = flags.find((f) => {
    const cmds = FLAG_BY_NAME.get(f.name)!.commands;
    return cmds !== undefined && !cmds.includes(command0 as FlagCommand);
  });
  if (misplaced !== undefined) {
    const cmds = FLAG_BY_NAME.get(misplaced.name)!.commands!;
    throw new UsageError(
      `--${misplaced.name}: only the ${cmds.join(", ").replace(/, ([^,]*)$/, " and $1")} command${
        cmds.length > 1 ? "s take" : " takes"
      } it`,
    );
  }
  const explain = command0 === "explain" && !help ? parseExplainQuery(positionals[1], given) : undefined;
  const migrate = command0 === "migrate" && !help ? parseMigrateQuery(given) : undefined;
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
  if (fromFile) {
    const ignored = [
      ...new Set(flags.filter((f) => !FLAG_BY_NAME.get(f.name)!.withConfig).map((f) => `--${f.name}`)),
    ];
    if (ignored.length > 0) warnings.push(`--config is set: ignoring flags ${ignored.join(", ")}`);
  }
  for (const f of flags) {
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
  const command = chooseCommand(given, positionals[0], help);
  if (!modeChosen && (command === "run" || command === "init-only")) warnings.push(DEFAULT_MODE_WARNING);
  return {
    command,
    config,
    kubeProxyConfiguration: v,
    writeConfigTo,
    warnings,
    notApplying: notApplying(config, v.featureGates, flags),
    flagValues: FLAGS.filter((f) => f.origin !== "command").map((
      f,
    ) => [`--${f.name}`, given(f.name) ?? f.default]),
    configFile: configFile === undefined ? undefined : { path: configFile, text: configText },
    trace: trace === undefined ? undefined : { ...trace, modeChosen },
    explain,
    migrate,
    configFor: (mode) => toProxyConfig(platformDefaults({ ...structuredClone(given0), mode }), ctx.own),
    usage: command0 === undefined ? USAGE : commandUsage(command0 as FlagCommand),
    renderNodeIPs: positionals[0] === "render" && given("node-ip") !== undefined
      ? parseIPList("--node-ip", given("node-ip")!)
      : undefined,
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

/** Which command the flags and the positional argument ask for (the first that applies, as upstream's order). */
function chooseCommand(
  given: (name: string) => string | undefined,
  positional: string | undefined,
  help: boolean,
): ParsedCommand["command"] {
  if (help) return "help";
  const version = given("version");
  if (version !== undefined && version !== "false") return "version";
  if (given("write-config-to") !== undefined) return "write-config";
  if (bool(given, "cleanup")) return "cleanup";
  if (bool(given, "init-only")) return "init-only";
  return positional === "render" || positional === "trace" || positional === "explain" ||
      positional === "migrate"
    ? positional
    : "run";
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
