/**
 * The one logger interface the program uses, and its implementation in klog's text and JSON shapes.
 * @module
 */

/** Structured fields attached to a log record. */
export type Fields = Record<string, unknown>;

/** A structured logger; every component receives one instead of using `console`. */
export interface Logger {
  /** A detail, written from verbosity `v` (default 4) up, as klog's `V(v).Info`. */
  debug(msg: string, fields?: Fields, v?: number): void;
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
 * Returns the logger of the program, writing klog's shapes to stderr, as upstream kube-proxy's
 * logs look (so log parsers and alerts written for it match):
 * - text: `I1124 00:59:09.855879   28555 proxier.ts:123] "Syncing rules" family="IPv4" services=3`
 *   (level letter I, W or E; local date and time to the microsecond; process id; the calling file and
 *   line; the message quoted; then each field, strings quoted);
 * - json: one object per line, `{"ts":<ms since epoch>,"caller":"proxier.ts:123","msg":"...","v":0, ...}`
 *   (`v` is the verbosity of info records and absent on errors, as component-base's JSON format).
 * `verbosity` follows klog: a debug record is written from its level up (default 4).
 */
export function setupLogging(format: "text" | "json", verbosity: number): Promise<Logger> {
  const enc = new TextEncoder();
  const write = (line: string) => {
    const data = enc.encode(line + "\n");
    let off = 0;
    while (off < data.length) off += Deno.stderr.writeSync(data.subarray(off));
  };
  const record = (level: "debug" | "info" | "warn" | "error", msg: string, fields: Fields = {}, at = 4) => {
    if (level === "debug" && verbosity < at) return;
    const now = performance.timeOrigin + performance.now();
    const caller = callerOf(new Error().stack);
    if (format === "json") {
      const v = level === "error" ? {} : { v: level === "debug" ? at : 0 };
      write(JSON.stringify({ ts: Math.round(now * 1000) / 1000, caller, msg, ...v, ...fields }));
      return;
    }
    const letter = level === "error" ? "E" : level === "warn" ? "W" : "I";
    const kv = Object.entries(fields).map(([k, x]) => ` ${k}=${klogValue(x)}`).join("");
    write(`${letter}${klogTime(now)} ${String(Deno.pid).padStart(7)} ${caller}] ${JSON.stringify(msg)}${kv}`);
  };
  return Promise.resolve({
    debug: (m, f, v) => record("debug", m, f, v),
    info: (m, f) => record("info", m, f),
    warn: (m, f) => record("warn", m, f),
    error: (m, f) => record("error", m, f),
  });
}

/** klog's header time: `MMDD hh:mm:ss.uuuuuu`, local time. */
function klogTime(ms: number): string {
  const d = new Date(ms);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  const micros = Math.floor((ms % 1000) * 1000);
  return `${p(d.getMonth() + 1)}${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${
    p(d.getSeconds())
  }.${p(micros, 6)}`;
}

/** A field's value as klog's text format writes it: strings quoted, numbers and booleans bare. */
function klogValue(x: unknown): string {
  if (typeof x === "string") return JSON.stringify(x);
  if (typeof x === "number" || typeof x === "boolean" || typeof x === "bigint") return String(x);
  if (x === undefined || x === null) return "<nil>";
  if (x instanceof Error) return JSON.stringify(x.message);
  return JSON.stringify(x) ?? String(x);
}

/** `file.ts:line` of the first stack frame outside this module: who logged. */
function callerOf(stack: string | undefined): string {
  for (const line of (stack ?? "").split("\n").slice(1)) {
    const m = /([^/\s(]+\.[tj]s):(\d+):\d+\)?$/.exec(line);
    if (m !== null && m[1] !== "logger.ts") return `${m[1]}:${m[2]}`;
  }
  return "kube-proxy-deno:0";
}

/** Log records are written as they are made; kept for callers that flush before exiting. */
export function flushLogging(): Promise<void> {
  return Promise.resolve();
}
