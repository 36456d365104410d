/**
 * A stateful ipset for tests: `restore` reads exactly what `ipset restore -exist` reads, with
 * ipset 7's messages and its buffering (a run of add/del lines is sent when another kind of line
 * comes or the input ends, and is lost when a line fails first); `save()` prints `ipset save`'s
 * lines without the kernel's random initval.
 * @module
 */
import {
  checkEntry,
  type IPSet,
  type IpsetContent,
  IpsetError,
  type IpsetSpec,
  type IpsetType,
  parseIpsetSave,
} from "../ipset.ts";

interface FakeSet {
  spec: IpsetSpec;
  entries: Set<string>;
}

/** Holds sets; every batch is recorded. */
export class FakeIpset implements IPSet {
  readonly #sets = new Map<string, FakeSet>();
  /** Every batch applied (or attempted), as given. */
  readonly batches: string[][] = [];
  /** Sets iptables rules refer to: destroying one fails, as in the kernel. */
  referenced: (name: string) => boolean = () => false;

  /** @inheritdoc */
  save(): Promise<Map<string, IpsetContent>> {
    return Promise.resolve(parseIpsetSave(this.text()));
  }

  /** The sets, as the tracer's `-m set` lookup (its `SetLookup`). */
  lookup(): { get(name: string): { type: string; entries: ReadonlySet<string> } | undefined } {
    return {
      get: (name) => {
        const set = this.#sets.get(name);
        return set === undefined ? undefined : { type: set.spec.type, entries: set.entries };
      },
    };
  }

  /** The entries of set `name`, sorted; undefined when it does not exist. */
  entries(name: string): string[] | undefined {
    const s = this.#sets.get(name);
    return s === undefined ? undefined : [...s.entries].sort();
  }

  /** What `ipset save` prints, less `bucketsize`/`initval` (the kernel's own, random). */
  text(): string {
    let out = "";
    for (const { spec, entries } of this.#sets.values()) {
      out += spec.type === "bitmap:port"
        ? `create ${spec.name} bitmap:port range 0-65535\n`
        : `create ${spec.name} ${spec.type} family ${
          spec.family === "IPv6" ? "inet6" : "inet"
        } hashsize 1024 maxelem 65536\n`;
      for (const e of entries) out += `add ${spec.name} ${e}\n`;
    }
    return out;
  }

  /** @inheritdoc */
  restore(lines: readonly string[]): Promise<void> {
    this.batches.push([...lines]);
    let pending: Array<() => void> = [];
    const flush = () => {
      for (const op of pending) op();
      pending = [];
    };
    for (const [i, line] of lines.entries()) {
      const fail = (msg: string) =>
        Promise.reject(
          new IpsetError(`ipset restore exited 1: ipset v7.17: Error in line ${i + 1}: ${msg}`, 1, line),
        );
      const w = line.trim().split(/\s+/);
      const set = this.#sets.get(w[1]);
      if (w[0] === "add" || w[0] === "del") {
        if (set === undefined) return fail("The set with the given name does not exist");
        const entry = w[2] ?? "";
        try {
          checkEntry(set.spec, entry);
        } catch {
          return fail(`Syntax error: ${entry} is not a ${set.spec.type} element`);
        }
        pending.push(() => w[0] === "add" ? set.entries.add(entry) : set.entries.delete(entry));
        continue;
      }
      flush();
      if (w[0] === "create") {
        const spec = parseCreate(w);
        if (spec === undefined) return fail(`Syntax error: ${line}`);
        if (set !== undefined) {
          if (set.spec.type !== spec.type || set.spec.family !== spec.family) {
            return fail("Set cannot be created: set with the same name already exists");
          }
          continue;
        }
        this.#sets.set(spec.name, { spec, entries: new Set() });
      } else if (w[0] === "flush") {
        if (set === undefined) return fail("The set with the given name does not exist");
        set.entries.clear();
      } else if (w[0] === "destroy") {
        if (set === undefined) continue; // -exist
        if (this.referenced(w[1])) return fail("Set cannot be destroyed: it is in use by a kernel component");
        this.#sets.delete(w[1]);
      } else if (w[0] === "swap") {
        const other = this.#sets.get(w[2]);
        if (set === undefined) return fail("The set with the given name does not exist");
        if (other === undefined) return fail("Sets cannot be swapped: the second set does not exist");
        if (set.spec.type !== other.spec.type) {
          return fail("Sets cannot be swapped: their type does not match");
        }
        [set.entries, other.entries] = [other.entries, set.entries];
      } else {
        return fail(`Syntax error: unknown command ${w[0]}`);
      }
    }
    flush();
    return Promise.resolve();
  }
}

function parseCreate(w: string[]): IpsetSpec | undefined {
  const type = w[2] as IpsetType;
  if (type === "bitmap:port") return { name: w[1], type };
  if (!["hash:ip", "hash:ip,port", "hash:ip,port,ip", "hash:ip,port,net"].includes(type)) return undefined;
  return { name: w[1], type, family: w.includes("inet6") ? "IPv6" : "IPv4" };
}
