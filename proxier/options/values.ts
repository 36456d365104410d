/**
 * Parsers of single flag and config values; each error names the flag (or config field) and the
 * value, so main can print it and exit 2.
 * @module
 */
import { UsageError } from "../errors.ts";
import { cidrFamily, ipFamily, normalizeCIDR } from "../net.ts";
import type { BindAddress, IptablesBackend, PortRange, ProxyMode, SourceSpec } from "./config.ts";
import { parseDuration } from "./duration.ts";
import { SCHEDULERS } from "../../iptables/ipvs.ts";

/** Parses `MIN-MAX`, `MIN+COUNT` or a single port; returns undefined when malformed. */
export function parsePortRange(s: string): PortRange | undefined {
  if (s === "") return { min: 0, max: 0 };
  const m = /^(\d{1,5})(?:([-+])(\d{1,5}))?$/.exec(s.trim());
  if (m === null) return undefined;
  const min = Number(m[1]);
  const max = m[2] === undefined ? min : m[2] === "-" ? Number(m[3]) : min + Number(m[3]);
  if (min < 1 || max > 65535 || max < min) return undefined;
  return { min, max };
}

/** Returns the mode named `s` (empty: the default). @throws {UsageError} naming `flag`. */
export function parseMode(flag: string, s: string): ProxyMode {
  if (s === "") return "iptables";
  if (s === "iptables" || s === "ipvs" || s === "nftables" || s === "userspace") return s;
  throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (iptables, ipvs, nftables or userspace)`);
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

/** Returns the comma-separated CIDRs of `s` (empty: none). @throws {UsageError} naming `flag`. */
export function parseCIDRs(flag: string, s: string): string[] {
  if (s.trim() === "") return [];
  return s.split(",").map((x) => {
    const t = x.trim();
    if (cidrFamily(t) === undefined) throw new UsageError(`${flag}: invalid CIDR ${JSON.stringify(t)}`);
    // Rules match the network, as upstream's (Go's ParseCIDR drops the host bits).
    return normalizeCIDR(t);
  });
}

/** Returns the --detect-local-mode value. @throws {UsageError} naming `flag`. */
export function parseLocalMode(flag: string, s: string): "ClusterCIDR" | "NodeCIDR" {
  if (s === "ClusterCIDR" || s === "NodeCIDR") return s;
  throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (ClusterCIDR or NodeCIDR)`);
}

/** Returns an `--iptables-backend` value. @throws {UsageError} naming `flag`. */
export function parseBackend(flag: string, s: string): IptablesBackend {
  if (s === "auto" || s === "nft" || s === "legacy") return s;
  throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (auto, nft or legacy)`);
}

/** Returns `IP:PORT` as a bind address, or undefined for "" (disabled). @throws {UsageError} naming `flag`. */
export function parseBind(flag: string, s: string): BindAddress | undefined {
  if (s === "") return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(s);
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (m === null || ipFamily(host) === undefined || port > 65535) {
    throw new UsageError(`${flag}: invalid address ${JSON.stringify(s)} (want IP:PORT)`);
  }
  return { hostname: host!, port };
}

/** Returns the integer `s` within [min, max]. @throws {UsageError} naming `flag`. */
export function intFlag(flag: string, s: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(s) || Number(s) < min || Number(s) > max) {
    throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (an integer from ${min} to ${max})`);
  }
  return Number(s);
}

/** Returns the Go-syntax duration `s` in ms, at least `minMs`. @throws {UsageError} naming `flag`. */
export function durationFlag(flag: string, s: string, minMs: number): number {
  const ms = parseDuration(s);
  if (ms === undefined) {
    throw new UsageError(`${flag}: invalid duration ${JSON.stringify(s)} (e.g. 1s, 500ms, 1m30s)`);
  }
  if (ms < minMs) throw new UsageError(`${flag}: duration ${JSON.stringify(s)} must be positive`);
  return ms;
}

/** The `--nodeport-addresses` value meaning the node's primary IPs (upstream 1.29+). */
export const NODE_PORT_PRIMARY = "primary";

/**
 * Returns `--nodeport-addresses` / `nodePortAddresses`: CIDRs (normalised) and `primary`, kept as
 * is for the proxiers to resolve from the Node. @throws {UsageError} naming `flag`.
 */
export function parseNodePortAddresses(flag: string, s: string): string[] {
  return s.split(",").map((x) => x.trim()).filter((x) => x !== "").flatMap((x) =>
    x === NODE_PORT_PRIMARY ? [x] : parseCIDRs(flag, x)
  );
}

/** Returns an `--ipvs-scheduler` value. @throws {UsageError} naming `flag`. */
export function parseScheduler(flag: string, s: string): string {
  if (SCHEDULERS.has(s)) return s;
  throw new UsageError(`${flag}: invalid value ${JSON.stringify(s)} (${[...SCHEDULERS].join(", ")})`);
}
