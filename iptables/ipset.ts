/**
 * ipset through `ipset`: the sets the ipvs mode matches in iptables, read with `ipset save` and
 * changed with one `ipset restore -exist` batch per sync (create, add, del, flush, swap, destroy).
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";
import { addressFamily, type IPFamily } from "./ip.ts";

/** The set types the ipvs mode uses. */
export type IpsetType = "hash:ip" | "hash:ip,port" | "hash:ip,port,ip" | "hash:ip,port,net" | "bitmap:port";

/** A set's name, type and (hash sets) address family. */
export interface IpsetSpec {
  readonly name: string;
  readonly type: IpsetType;
  /** The family of a hash set's addresses; bitmap:port sets have none. */
  readonly family?: IPFamily;
}

/** A set as `ipset save` prints it. */
export interface IpsetContent {
  readonly spec: IpsetSpec;
  readonly entries: ReadonlySet<string>;
}

/** The operations the ipvs mode needs. */
export interface IPSet {
  /** Every set with its entries. */
  save(): Promise<Map<string, IpsetContent>>;
  /**
   * Applies `lines` with `ipset restore -exist` (adding what exists and deleting what does not are
   * not errors). ipset stops at the first failing line, the lines before it applied.
   * @throws {IpsetError} naming the line.
   */
  restore(lines: readonly string[], signal?: AbortSignal): Promise<void>;
}

/** A batch failed; `line` is the batch line ipset named, when it named one. */
export class IpsetError extends ExecError {
  /** @param line the failing batch line. */
  constructor(message: string, code: number, readonly line?: string, options?: ErrorOptions) {
    super(message, code, options);
    this.name = "IpsetError";
  }
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,30}$/;
const TYPES: ReadonlySet<string> = new Set([
  "hash:ip",
  "hash:ip,port",
  "hash:ip,port,ip",
  "hash:ip,port,net",
  "bitmap:port",
]);
const PROTOS = new Set(["tcp", "udp", "sctp"]);

function checkName(name: string): string {
  if (!NAME.test(name)) throw new IpsetError(`ipset: bad set name ${JSON.stringify(name)}`, -1);
  return name;
}

/** The batch line creating `spec` (hash sets sized as upstream's). */
export function createSet(spec: IpsetSpec): string {
  checkName(spec.name);
  if (!TYPES.has(spec.type)) throw new IpsetError(`ipset: bad type ${JSON.stringify(spec.type)}`, -1);
  if (spec.type === "bitmap:port") return `create ${spec.name} bitmap:port range 0-65535`;
  const family = spec.family === "IPv6" ? "inet6" : "inet";
  return `create ${spec.name} ${spec.type} family ${family} hashsize 1024 maxelem 65536`;
}

/**
 * Returns `entry` when it is a valid entry of a set of `spec`'s type and family (`10.0.0.1,tcp:80`,
 * `10.0.0.1,tcp:80,10.1.0.1`, `10.0.0.1,tcp:80,192.168.0.0/24`, `30080`, `10.0.0.1`).
 * @throws {IpsetError} for anything else, so no field can inject text.
 */
export function checkEntry(spec: IpsetSpec, entry: string): string {
  const bad = () =>
    new IpsetError(`ipset: bad ${spec.type} entry ${JSON.stringify(entry)} for ${spec.name}`, -1);
  if (spec.type === "bitmap:port") {
    if (!/^\d{1,5}$/.test(entry) || Number(entry) > 65535) throw bad();
    return entry;
  }
  const parts = entry.split(",");
  const ipOK = (ip: string | undefined) => ip !== undefined && addressFamily(ip) === (spec.family ?? "IPv4");
  if (!ipOK(parts[0])) throw bad();
  if (spec.type === "hash:ip") {
    if (parts.length !== 1) throw bad();
    return entry;
  }
  const pp = /^([a-z]+):(\d{1,5})$/.exec(parts[1] ?? "");
  if (pp === null || !PROTOS.has(pp[1]) || Number(pp[2]) > 65535) throw bad();
  if (spec.type === "hash:ip,port") {
    if (parts.length !== 2) throw bad();
  } else if (spec.type === "hash:ip,port,ip") {
    if (parts.length !== 3 || !ipOK(parts[2])) throw bad();
  } else {
    // A net, or a single address (as ipset prints a /32 or /128).
    const [net, bits] = (parts[2] ?? "").split("/");
    const max = spec.family === "IPv6" ? 128 : 32;
    if (
      parts.length !== 3 || !ipOK(net) ||
      (bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > max))
    ) {
      throw bad();
    }
  }
  return entry;
}

/** The batch line adding `entry` to `spec`'s set. */
export function addEntry(spec: IpsetSpec, entry: string): string {
  return `add ${checkName(spec.name)} ${checkEntry(spec, entry)}`;
}

/** The batch line deleting `entry` from `spec`'s set. */
export function delEntry(spec: IpsetSpec, entry: string): string {
  return `del ${checkName(spec.name)} ${checkEntry(spec, entry)}`;
}

/** The batch line emptying a set. */
export function flushSet(name: string): string {
  return `flush ${checkName(name)}`;
}

/** The batch line destroying a set (it must not be referenced by iptables). */
export function destroySet(name: string): string {
  return `destroy ${checkName(name)}`;
}

/**
 * Pauses before each retry of {@linkcode destroySets} (ms): about 3 s in all. The kernel lets go
 * of a deleted rule's sets within milliseconds on an idle machine; a busy one (a loaded VM) takes longer.
 */
export const SET_RELEASE_WAITS_MS: readonly number[] = [50, 100, 200, 400, 800, 1600];

/**
 * Destroys the sets of `names` that exist, again after each pause of `waitsMs` while the kernel
 * still holds one ("in use by a kernel component"): iptables on nf_tables returns once a rule's
 * deletion is committed, and the kernel drops the rule's reference to its set afterwards, in a
 * worker, so a destroy right after the rules went may find the set still in use for a moment.
 * @throws {IpsetError} what ipset said, once the pauses are spent or on any other failure.
 */
export async function destroySets(
  ipset: IPSet,
  names: readonly string[],
  waitsMs: readonly number[] = SET_RELEASE_WAITS_MS,
): Promise<void> {
  for (let left = names, attempt = 0; left.length > 0; attempt++) {
    try {
      return await ipset.restore(left.map(destroySet));
    } catch (e) {
      if (
        attempt >= waitsMs.length || !(e instanceof Error) || !/in use by a kernel component/.test(e.message)
      ) {
        throw e;
      }
      await new Promise((resolve) => setTimeout(resolve, waitsMs[attempt]));
      const held = await ipset.save();
      left = left.filter((n) => held.has(n));
    }
  }
}

/** The batch line swapping two sets' contents (same type). */
export function swapSets(a: string, b: string): string {
  return `swap ${checkName(a)} ${checkName(b)}`;
}

/** Parses `ipset save`. */
export function parseIpsetSave(text: string): Map<string, IpsetContent> {
  const out = new Map<string, { spec: IpsetSpec; entries: Set<string> }>();
  for (const line of text.split("\n")) {
    const w = line.trim().split(/\s+/);
    if (w[0] === "create") {
      const family = w.includes("inet6") ? "IPv6" : w[2] === "bitmap:port" ? undefined : "IPv4";
      out.set(w[1], { spec: { name: w[1], type: w[2] as IpsetType, family }, entries: new Set() });
    } else if (w[0] === "add") {
      out.get(w[1])?.entries.add(w[2]);
    }
  }
  return out;
}

/** ipset through an executor. */
export class IpsetRunner implements IPSet {
  readonly #exec: Executor;

  /** Runs nothing until asked. */
  constructor(opts: { exec: Executor }) {
    this.#exec = opts.exec;
  }

  /** @inheritdoc */
  async save(): Promise<Map<string, IpsetContent>> {
    const r = await this.#exec.run("ipset", { args: ["save"] });
    if (r.code !== 0) throw new IpsetError(`ipset save exited ${r.code}: ${r.stderr.trim()}`, r.code);
    return parseIpsetSave(r.stdout);
  }

  /** @inheritdoc */
  async restore(lines: readonly string[], signal?: AbortSignal): Promise<void> {
    if (lines.length === 0) return;
    const r = await this.#exec.run("ipset", {
      args: ["restore", "-exist"],
      stdin: lines.join("\n") + "\n",
      signal,
    });
    if (r.code === 0) return;
    const m = /Error in line (\d+)/.exec(r.stderr);
    const line = m === null ? undefined : lines[Number(m[1]) - 1];
    throw new IpsetError(`ipset restore exited ${r.code}: ${r.stderr.trim()}`, r.code, line);
  }
}
