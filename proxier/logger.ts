/**
 * The one logger interface the program uses, and its LogTape-backed implementation.
 * @module
 */
import {
  configure,
  dispose,
  getJsonLinesFormatter,
  getLogger,
  getStreamSink,
  getTextFormatter,
  type LogLevel,
} from "@logtape/logtape";

/** Structured fields attached to a log record. */
export type Fields = Record<string, unknown>;

/** A structured logger; every component receives one instead of using `console`. */
export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

/** A logger that drops everything; for `render` and for tests that do not read logs. */
export const nullLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};

/** Returns `log` without its debug and info records: what `render` shows beside its output. */
export function warningsOnly(log: Logger): Logger {
  return { debug() {}, info() {}, warn: (m, f) => log.warn(m, f), error: (m, f) => log.error(m, f) };
}

/**
 * Configures LogTape to write to stderr (text or JSON lines) and returns a logger for the
 * program. `verbosity` follows klog: 4 and above enables debug records.
 */
export async function setupLogging(format: "text" | "json", verbosity: number): Promise<Logger> {
  const formatter = format === "json" ? getJsonLinesFormatter({ properties: "flatten" }) : getTextFormatter({
    timestamp: "date-time-tz",
    value: (v) => typeof v === "string" ? v : JSON.stringify(v),
  });
  const lowestLevel: LogLevel = verbosity >= 4 ? "debug" : "info";
  await configure({
    reset: true,
    sinks: { stderr: getStreamSink(Deno.stderr.writable, { formatter }) },
    loggers: [
      { category: ["kube-proxy-deno"], lowestLevel, sinks: ["stderr"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: ["stderr"] },
    ],
  });
  const lt = getLogger(["kube-proxy-deno"]);
  const fieldsText = (msg: string, f?: Fields) =>
    format === "json" || f === undefined || Object.keys(f).length === 0
      ? msg
      : `${msg} ${
        Object.entries(f).map(([k, v]) =>
          `${k}=${typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v) ?? String(v)}`
        ).join(" ")
      }`;
  // LogTape treats {x} in messages as placeholders; escape braces so text stays literal.
  const esc = (s: string) => s.replaceAll("{", "{{").replaceAll("}", "}}");
  return {
    debug: (m, f) => lt.debug(esc(fieldsText(m, f)), f ?? {}),
    info: (m, f) => lt.info(esc(fieldsText(m, f)), f ?? {}),
    warn: (m, f) => lt.warn(esc(fieldsText(m, f)), f ?? {}),
    error: (m, f) => lt.error(esc(fieldsText(m, f)), f ?? {}),
  };
}

/** Flushes and closes the log sinks; call before the process exits so no record is lost. */
export async function flushLogging(): Promise<void> {
  await dispose();
}
