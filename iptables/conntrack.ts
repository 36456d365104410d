/**
 * Deleting stale conntrack entries (`conntrack -D`), so UDP clients are not pinned to endpoints
 * that went away.
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";
import type { IPFamily } from "./ip.ts";

/** The deletions the proxiers need. */
export interface Conntrack {
  /** Deletes entries whose original destination is `ip` (optionally only `port`). */
  clearServiceIP(ip: string, protocol: string, port?: number): Promise<void>;
  /** Deletes entries to `origDst` that were DNATed to `endpointIP`. */
  clearEndpoint(origDst: string, endpointIP: string, protocol: string): Promise<void>;
  /** Deletes entries to node port `port` (optionally only those DNATed to `endpointIP`). */
  clearNodePort(port: number, protocol: string, endpointIP?: string): Promise<void>;
}

/** conntrack(8) through an executor. */
export class ConntrackRunner implements Conntrack {
  readonly #exec: Executor;
  readonly #family: IPFamily;

  /** Runs nothing until asked. */
  constructor(opts: { exec: Executor; family: IPFamily }) {
    this.#exec = opts.exec;
    this.#family = opts.family;
  }

  async #delete(args: string[]): Promise<void> {
    const full = ["-D", ...args, ...(this.#family === "IPv6" ? ["-f", "ipv6"] : [])];
    const r = await this.#exec.run("conntrack", { args: full });
    // Exit 1 with "0 flow entries have been deleted" is not a failure: there was nothing to delete.
    if (r.code === 0 || /0 flow entries/.test(r.stderr)) return;
    throw new ExecError(`conntrack ${full.join(" ")} exited ${r.code}: ${r.stderr.trim()}`, r.code);
  }

  /** @inheritdoc */
  clearServiceIP(ip: string, protocol: string, port?: number): Promise<void> {
    return this.#delete([
      "--orig-dst",
      ip,
      "-p",
      protocol.toLowerCase(),
      ...(port ? ["--dport", String(port)] : []),
    ]);
  }

  /** @inheritdoc */
  clearEndpoint(origDst: string, endpointIP: string, protocol: string): Promise<void> {
    return this.#delete(["--orig-dst", origDst, "--dst-nat", endpointIP, "-p", protocol.toLowerCase()]);
  }

  /** @inheritdoc */
  clearNodePort(port: number, protocol: string, endpointIP?: string): Promise<void> {
    return this.#delete([
      "-p",
      protocol.toLowerCase(),
      "--dport",
      String(port),
      ...(endpointIP ? ["--dst-nat", endpointIP] : []),
    ]);
  }
}
