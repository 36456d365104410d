/**
 * nfacct(8): named packet and byte counters that iptables rules feed through
 * `-m nfacct --nfacct-name NAME`, read without listing any rule.
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";

/** A counter's totals. */
export interface NfacctTotals {
  readonly packets: number;
  readonly bytes: number;
}

/** The counters the iptables mode keeps. */
export interface Nfacct {
  /** Creates counter `name` unless it exists. */
  ensure(name: string): Promise<void>;
  /** Returns counter `name`'s totals, or undefined when it does not exist. */
  get(name: string): Promise<NfacctTotals | undefined>;
}

/** What a counter name may be (the kernel's NFACCT_NAME_MAX is 32 bytes with its NUL). */
const NAME = /^[A-Za-z0-9_]{1,31}$/;

/** nfacct(8) through an executor; names are checked, never passed through a shell. */
export class NfacctRunner implements Nfacct {
  readonly #exec: Executor;

  /** Runs nothing until asked. */
  constructor(opts: { exec: Executor }) {
    this.#exec = opts.exec;
  }

  /** @inheritdoc */
  async ensure(name: string): Promise<void> {
    if (!NAME.test(name)) throw new ExecError(`nfacct: bad counter name ${JSON.stringify(name)}`);
    const r = await this.#exec.run("nfacct", { args: ["add", name] });
    // An existing counter is EBUSY to `nfacct add`: it keeps its totals, as wanted.
    if (r.code !== 0 && !/busy|exists/i.test(r.stderr)) {
      throw new ExecError(`nfacct add ${name} exited ${r.code}: ${r.stderr.trim()}`, r.code);
    }
  }

  /** @inheritdoc */
  async get(name: string): Promise<NfacctTotals | undefined> {
    if (!NAME.test(name)) throw new ExecError(`nfacct: bad counter name ${JSON.stringify(name)}`);
    const r = await this.#exec.run("nfacct", { args: ["get", name] });
    if (r.code !== 0) {
      if (/No such file or directory/.test(r.stderr)) return undefined;
      throw new ExecError(`nfacct get ${name} exited ${r.code}: ${r.stderr.trim()}`, r.code);
    }
    return parseNfacct(r.stdout, name);
  }
}

/**
 * Returns counter `name`'s totals from `nfacct get`/`list` output
 * (`{ pkts = 00000000000000000042, bytes = 00000000000000004200 } = name;`), or undefined.
 */
export function parseNfacct(text: string, name: string): NfacctTotals | undefined {
  for (const line of text.split("\n")) {
    const m = /^\s*\{\s*pkts\s*=\s*(\d+),\s*bytes\s*=\s*(\d+)\s*\}\s*=\s*([^;\s]+);/.exec(line);
    if (m !== null && m[3] === name) return { packets: Number(m[1]), bytes: Number(m[2]) };
  }
  return undefined;
}
