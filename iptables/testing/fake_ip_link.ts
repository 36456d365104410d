/**
 * A dummy interface for tests: addresses bound and unbound in batches with `ip -force -batch`'s
 * messages (a failing line does not stop the others).
 * @module
 */
import { type DummyLink, KUBE_IPVS_INTERFACE } from "../ip_link.ts";
import { ExecError } from "../executor.ts";

/** Holds the interface's existence, state and addresses; every batch is recorded. */
export class FakeIpLink implements DummyLink {
  readonly name = KUBE_IPVS_INTERFACE;
  exists = false;
  up = false;
  readonly bound = new Set<string>();
  /** Every apply, as [added, removed]. */
  readonly batches: Array<[string[], string[]]> = [];

  /** @inheritdoc */
  ensure(): Promise<void> {
    this.exists = true;
    this.up = true;
    return Promise.resolve();
  }

  /** @inheritdoc */
  addresses(): Promise<string[]> {
    return Promise.resolve(this.exists ? [...this.bound] : []);
  }

  /** @inheritdoc */
  apply(add: readonly string[], remove: readonly string[]): Promise<void> {
    this.batches.push([[...add], [...remove]]);
    const errors: string[] = [];
    let n = 0;
    for (const ip of remove) {
      n++;
      if (!this.exists || !this.bound.delete(ip)) {
        errors.push(`RTNETLINK answers: Cannot assign requested address`, `Command failed -:${n}`);
      }
    }
    for (const ip of add) {
      n++;
      if (!this.exists) errors.push(`Cannot find device "${this.name}"`, `Command failed -:${n}`);
      else if (this.bound.has(ip)) errors.push("RTNETLINK answers: File exists", `Command failed -:${n}`);
      else this.bound.add(ip);
    }
    if (errors.length === 0) return Promise.resolve();
    return Promise.reject(new ExecError(`ip -batch exited 1: ${errors.join("; ")}`, 1));
  }

  /** @inheritdoc */
  remove(): Promise<void> {
    this.exists = false;
    this.up = false;
    this.bound.clear();
    return Promise.resolve();
  }
}
