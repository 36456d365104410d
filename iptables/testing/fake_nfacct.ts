/**
 * Stateful nfacct for tests: counters by name, moved by hand (`count`).
 * @module
 */
import type { Nfacct, NfacctTotals } from "../nfacct.ts";

/** Holds counters; `ensure` keeps an existing one's totals, as the kernel does. */
export class FakeNfacct implements Nfacct {
  readonly #counters = new Map<string, { packets: number; bytes: number }>();
  /** When set, every call fails with this message (nfacct not installed, no nfnetlink_acct). */
  failing?: string;

  /** @inheritdoc */
  ensure(name: string): Promise<void> {
    if (this.failing !== undefined) return Promise.reject(new Error(this.failing));
    if (!this.#counters.has(name)) this.#counters.set(name, { packets: 0, bytes: 0 });
    return Promise.resolve();
  }

  /** @inheritdoc */
  get(name: string): Promise<NfacctTotals | undefined> {
    if (this.failing !== undefined) return Promise.reject(new Error(this.failing));
    const c = this.#counters.get(name);
    return Promise.resolve(c === undefined ? undefined : { ...c });
  }

  /** Counts `packets` (of 100 bytes each) on counter `name`, as a matching rule would. */
  count(name: string, packets: number): void {
    const c = this.#counters.get(name);
    if (c === undefined) throw new Error(`no nfacct counter ${name}`);
    c.packets += packets;
    c.bytes += packets * 100;
  }
}
