/**
 * Parsers of single flag and config values; each error names the flag (or config field) and the
 * value, so main can print it and exit 2.
 * @module
 */
import { UsageError } from "../runtime/errors.ts";
import { ipFamily } from "../model/net.ts";
import type { IptablesBackend, PortRange, SourceSpec } from "./config.ts";

/** Parses `MIN-MAX`, `MIN+COUNT` or a single port (empty: any port); returns undefined when malformed. */
export function parsePortRange(s: string): PortRange | undefined {
  if (s === "") return { min: 0, max: 0 };
  const m = /^(\d{1,5})(?:([-+])(\d{1,5}))?$/.exec(s.trim());
  if (m === null) return undefined;
  const min = Number(m[1]);
  const max = m[2] === undefined ? min : m[2] === "-" ? Number(m[3]) : min + Number(m[3]);
  if (min < 1 || max > 65535 || max < min) return undefined;
  return { min, max };
}

/** Returns the source `kubernetes` or `file:PATH`. @throws {UsageError} naming --source. */
export function parseSource(s: string): SourceSpec {
  if (s === "kubernetes") return { kind: "kubernetes" };
  if (s.startsWith("file:") && s.length > 5) return { kind: "file", path: s.slice(5) };
  throw new UsageError(`--source: invalid value ${JSON.stringify(s)} (kubernetes or file:PATH)`);
}

/** Returns `s` when it is an http(s) URL. @throws {UsageError} naming `flag`. */
export function parseURL(flag: string, s: string): string {
  try {
    const u = new URL(s);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("not http(s)");
  } catch (cause) {
    throw new UsageError(`${flag}: invalid URL ${JSON.stringify(s)}`, { cause });
  }
  return s;
}

/** Returns the node name, trimmed and lower-cased. @throws {UsageError} naming `flag`. */
export function parseNodeName(flag: string, s: string): string {
  const n = s.trim().toLowerCase();
  if (n.length === 0 || n.length > 253 || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(n)) {
    throw new UsageError(`${flag}: invalid node name ${JSON.stringify(s)}`);
  }
  return n;
}

/** Returns `s` when it is a valid IP literal. @throws {UsageError} naming `flag`. */
export function parseIP(flag: string, s: string): string {
  if (ipFamily(s) === undefined) throw new UsageError(`${flag}: invalid IP address ${JSON.stringify(s)}`);
  return s;
}

/** Returns an `--iptables-backend` value. @throws {UsageError} naming `flag`. */
export function parseBackend(flag: string, s: string): IptablesBackend {
  if (s === "auto" || s === "nft" || s === "legacy") return s;
  throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (auto, nft or legacy)`);
}

/**
 * Returns `s` as an integer from `min` to `max` (int32 by default). @throws {UsageError} naming
 * `flag` and the range.
 */
export function parseInteger(flag: string, s: string, min = -(2 ** 31), max = 2 ** 31 - 1): number {
  if (!/^[+-]?\d+$/.test(s) || Number(s) < min || Number(s) > max) {
    throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (an integer from ${min} to ${max})`);
  }
  return Number(s);
}

/** Returns comma-separated IP literals (`--node-ip`). @throws {UsageError} naming `flag`. */
export function parseIPList(flag: string, text: string): string[] {
  return text.split(",").map((ip) => parseIP(flag, ip.trim()));
}
