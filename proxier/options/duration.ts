/**
 * Go `time.ParseDuration` syntax, as kube-proxy's duration flags accept it.
 * @module
 */

const UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Parses `1s`, `500ms`, `1m30s`, `1.5h`, `0` or a signed value (`-1s`, as Go) into milliseconds.
 * Returns undefined for anything else; whether a negative value is allowed is the caller's check.
 */
export function parseDuration(text: string): number | undefined {
  const sign = text.startsWith("-") ? -1 : 1;
  const s = text.startsWith("-") || text.startsWith("+") ? text.slice(1) : text;
  if (s === "0") return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  if (s.length === 0) return undefined;
  while (pos < s.length) {
    re.lastIndex = pos;
    const m = re.exec(s);
    if (m === null) return undefined;
    total += Number(m[1]) * UNITS[m[2]];
    pos = re.lastIndex;
  }
  return sign * total;
}

/** Formats milliseconds the way Go prints a duration (`1m30s`, `250ms`), for messages. */
export function formatDuration(ms: number): string {
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms === 0) return "0s";
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h > 0 ? `${h}h` : ""}${h > 0 || m > 0 ? `${m}m` : ""}${s}s`;
}
