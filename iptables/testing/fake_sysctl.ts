/**
 * A stateful sysctl(8) for unit tests: it holds values and refuses what the kernel refuses, with
 * the messages procps-ng's sysctl prints (the real tool is compared in `sysctl_test.ts`).
 * @module
 */
import { ExecError } from "../executor.ts";
import type { Sysctl, SysctlKey } from "../sysctl.ts";

/** What the fake kernel does with a write. */
export type WriteRule = "ok" | "einval" | "readonly";

/** A sysctl over an in-memory table; every write is recorded. */
export class FakeSysctl implements Sysctl {
  readonly values: Map<string, string>;
  /** Keys the kernel refuses to write (as nf_conntrack_max outside the host's namespace). */
  readonly refuse = new Set<string>();
  /** Every successful write, `key=value`, in order. */
  readonly writes: string[] = [];
  /** True: /proc/sys is mounted read-only (an unprivileged container); every write fails. */
  readOnly = false;

  /** Starts with `values`. */
  constructor(values: Record<string, string> = {}) {
    this.values = new Map(Object.entries(values));
  }

  /** @inheritdoc */
  get(key: SysctlKey): Promise<string> {
    const v = this.values.get(key);
    if (v === undefined) return Promise.reject(missing(key));
    return Promise.resolve(v);
  }

  /** @inheritdoc */
  set(key: SysctlKey, value: string): Promise<void> {
    if (!this.values.has(key)) return Promise.reject(missing(key));
    if (this.readOnly) {
      return Promise.reject(
        new ExecError(
          `sysctl -w ${key}=${value} failed (exit 1): sysctl: permission denied on key "${key}"`,
          1,
        ),
      );
    }
    if (this.refuse.has(key)) {
      return Promise.reject(
        new ExecError(`sysctl -w ${key}=${value} failed: sysctl: setting key "${key}": Invalid argument`, 1),
      );
    }
    this.values.set(key, value);
    this.writes.push(`${key}=${value}`);
    return Promise.resolve();
  }
}

function missing(key: string): ExecError {
  return new ExecError(
    `sysctl -n ${key} exited 1: sysctl: cannot stat /proc/sys/${
      key.replaceAll(".", "/")
    }: No such file or directory`,
    1,
  );
}
