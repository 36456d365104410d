/**
 * Kernel parameters through sysctl(8). Deno's permission model opens `/proc` only to `--allow-all`,
 * so the shipped permission set names this tool instead of widening to all.
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";

/** A kernel parameter, dotted as sysctl(8) names it. */
export type SysctlKey = `net.${string}`;

/** `net.ipv4.conf.all.route_localnet`: lets DNAT send 127.0.0.0/8 traffic out (NodePorts on localhost). */
export const ROUTE_LOCALNET: SysctlKey = "net.ipv4.conf.all.route_localnet";

/** What the proxiers read and write. */
export interface Sysctl {
  /** Returns the parameter's value, trimmed. */
  get(key: SysctlKey): Promise<string>;
  /** Sets the parameter. */
  set(key: SysctlKey, value: string): Promise<void>;
}

const KEY = /^net(\.[A-Za-z0-9_-]+)+$/;
const VALUE = /^[0-9]+$/;

/** sysctl(8) through an executor; keys and values are checked, never passed through a shell. */
export class SysctlRunner implements Sysctl {
  readonly #exec: Executor;

  /** Runs nothing until asked. */
  constructor(opts: { exec: Executor }) {
    this.#exec = opts.exec;
  }

  /** @inheritdoc */
  async get(key: SysctlKey): Promise<string> {
    if (!KEY.test(key)) throw new ExecError(`sysctl: bad key ${JSON.stringify(key)}`);
    const r = await this.#exec.run("sysctl", { args: ["-n", key] });
    if (r.code !== 0) throw new ExecError(`sysctl -n ${key} exited ${r.code}: ${r.stderr.trim()}`, r.code);
    return r.stdout.trim();
  }

  /** @inheritdoc */
  async set(key: SysctlKey, value: string): Promise<void> {
    if (!KEY.test(key) || !VALUE.test(value)) {
      throw new ExecError(`sysctl: bad setting ${JSON.stringify(`${key}=${value}`)}`);
    }
    const r = await this.#exec.run("sysctl", { args: ["-q", "-w", `${key}=${value}`] });
    // procps-ng's sysctl exits 0 when the kernel refuses the write (EINVAL, a read-only /proc/sys):
    // only its message tells, so any stderr is a failure.
    if (r.code !== 0 || r.stderr.trim() !== "") {
      throw new ExecError(
        `sysctl -w ${key}=${value} failed${r.code !== 0 ? ` (exit ${r.code})` : ""}: ${r.stderr.trim()}`,
        r.code === 0 ? 1 : r.code,
      );
    }
  }
}

/** Sets `key` to `value` unless it already has it; returns true when it wrote. */
export async function ensureSysctl(sysctl: Sysctl, key: SysctlKey, value: string): Promise<boolean> {
  if (await sysctl.get(key) === value) return false;
  await sysctl.set(key, value);
  return true;
}
