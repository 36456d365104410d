/**
 * A stateful IPVS for tests: `apply` reads exactly the batch lines `ipvsadm -R` reads (a failing
 * line is skipped with ipvsadm's message and the others apply, as ipvsadm does), `save()` prints
 * what `ipvsadm -S -n` prints, and tests move connection counts and traffic counters by hand.
 * @module
 */
import {
  hostPort,
  type IPVS,
  IpvsError,
  type IpvsProtocol,
  type IpvsService,
  type IpvsStats,
  parseConnections,
  parseSave,
  parseStats,
  type RealServer,
  type RealServerConnections,
  rsKey,
  SCHED_FLAGS,
  type VirtualServer,
  vsKey,
} from "../ipvsadm.ts";
import { addressFamily } from "../ip.ts";

interface Entry {
  vs: VirtualServer;
  reals: Map<string, RealServer & RealServerConnections>;
  stats: IpvsStats;
}

const NO_STATS: IpvsStats = { connections: 0, packetsIn: 0, packetsOut: 0, bytesIn: 0, bytesOut: 0 };

/** The schedulers Debian's 6.1 kernel ships as modules (`ip_vs_*.ko`): the ones ipvsadm can add. */
export const KERNEL_SCHEDULERS: ReadonlySet<string> = new Set([
  "rr",
  "wrr",
  "lc",
  "wlc",
  "lblc",
  "lblcr",
  "dh",
  "sh",
  "sed",
  "nq",
  "mh",
  "fo",
  "ovf",
]);

/** ipvsadm's names for sh/mh flags when it prints them. */
function flagName(scheduler: string, flag: string): string {
  if (scheduler !== "sh" && scheduler !== "mh") return flag;
  return flag === "flag-1" ? `${scheduler}-fallback` : flag === "flag-2" ? `${scheduler}-port` : "";
}

/** Holds virtual servers; every batch, table read and timeout setting is recorded. */
export class FakeIpvsadm implements IPVS {
  readonly #table = new Map<string, Entry>();
  /** Every batch applied (or attempted), as given. */
  readonly batches: string[][] = [];
  /** The last `setTimeouts` call. */
  timeouts?: [number, number, number];
  /** When set, the next apply fails this line (by index) and applies the others, as ipvsadm does. */
  failAtLine?: number;

  /** @inheritdoc */
  read(): Promise<IpvsService[]> {
    return Promise.resolve(parseSave(this.save()));
  }

  /** @inheritdoc */
  connections(): Promise<Map<string, RealServerConnections>> {
    return Promise.resolve(parseConnections(this.list()));
  }

  /** @inheritdoc */
  stats(): Promise<Map<string, IpvsStats>> {
    return Promise.resolve(parseStats(this.listStats()));
  }

  /** @inheritdoc */
  apply(lines: readonly string[]): Promise<void> {
    this.batches.push([...lines]);
    const failAt = this.failAtLine;
    this.failAtLine = undefined;
    // As ipvsadm: a failing line is skipped with a message, the rest still applies.
    const messages: string[] = [];
    let first: string | undefined;
    for (const [i, line] of lines.entries()) {
      const err = i === failAt ? "injected failure" : this.#applyLine(line);
      if (err === undefined) continue;
      messages.push(err);
      first ??= line;
    }
    if (messages.length === 0) return Promise.resolve();
    return Promise.reject(new IpvsError(`ipvsadm -R: ${messages.join("; ")}`, 255, first));
  }

  /** @inheritdoc */
  setTimeouts(tcp: number, tcpFin: number, udp: number): Promise<void> {
    this.timeouts = [tcp, tcpFin, udp];
    return Promise.resolve();
  }

  /** What `ipvsadm -S -n` prints. */
  save(): string {
    let out = "";
    for (const { vs, reals } of this.#table.values()) {
      out += `-A ${opt(vs.protocol)} ${hostPort(vs.address, vs.port)} -s ${vs.scheduler}`;
      if (vs.persistentTimeout !== undefined) out += ` -p ${vs.persistentTimeout}`;
      if (vs.flags.length > 0) out += ` -b ${vs.flags.map((f) => flagName(vs.scheduler, f)).join(",")}`;
      out += "\n";
      for (const r of reals.values()) {
        out += `-a ${opt(vs.protocol)} ${hostPort(vs.address, vs.port)} -r ${rsKey(r)} -m -w ${r.weight}\n`;
      }
    }
    return out;
  }

  /** What `ipvsadm -L -n` prints (the rows the parsers read). */
  list(): string {
    let out = "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n" +
      "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n";
    for (const { vs, reals } of this.#table.values()) {
      out += `${vs.protocol.toUpperCase().padEnd(4)} ${hostPort(vs.address, vs.port)} ${vs.scheduler}\n`;
      for (const r of reals.values()) {
        out += `  -> ${rsKey(r).padEnd(28)} Masq    ${r.weight}      ${r.active}          ${r.inactive}\n`;
      }
    }
    return out;
  }

  /** What `ipvsadm -L -n --stats --exact` prints. */
  listStats(): string {
    let out = "IP Virtual Server version 1.2.1 (size=4096)\n" +
      "Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n  -> RemoteAddress:Port\n";
    for (const { vs, stats: s } of this.#table.values()) {
      out += `${vs.protocol.toUpperCase().padEnd(4)} ${hostPort(vs.address, vs.port).padEnd(32)} ` +
        `${s.connections} ${s.packetsIn} ${s.packetsOut} ${s.bytesIn} ${s.bytesOut}\n`;
    }
    return out;
  }

  /** The virtual servers, by {@linkcode vsKey}. */
  services(): Map<string, VirtualServer> {
    return new Map([...this.#table].map(([k, e]) => [k, e.vs]));
  }

  /** The real servers of `key` with weight and connection counts, or undefined when it does not exist. */
  reals(key: string): Array<RealServer & RealServerConnections> | undefined {
    const e = this.#table.get(key);
    return e === undefined ? undefined : [...e.reals.values()];
  }

  /** Sets a real server's connection counts (as traffic would). */
  setConnections(key: string, rs: string, active: number, inactive: number): void {
    const r = this.#table.get(key)?.reals.get(rs);
    if (r === undefined) throw new Error(`fake ipvs: no real server ${rs} in ${key}`);
    Object.assign(r, { active, inactive });
  }

  /** Sets a virtual server's traffic counters. */
  setStats(key: string, stats: IpvsStats): void {
    const e = this.#table.get(key);
    if (e === undefined) throw new Error(`fake ipvs: no virtual server ${key}`);
    e.stats = stats;
  }

  /** Adds a virtual server someone else owns, as `ipvsadm -A` would. */
  addForeign(vs: VirtualServer): void {
    this.#table.set(vsKey(vs), { vs, reals: new Map(), stats: NO_STATS });
  }

  /** Applies one line; returns ipvsadm's message when it fails. */
  #applyLine(line: string): string | undefined {
    const w = line.trim().split(/\s+/);
    const op = w[0];
    const protocol: IpvsProtocol | undefined = w[1] === "-t"
      ? "tcp"
      : w[1] === "-u"
      ? "udp"
      : w[1] === "--sctp-service"
      ? "sctp"
      : undefined;
    if (!["-A", "-E", "-D", "-a", "-e", "-d"].includes(op) || protocol === undefined) {
      return `invalid line ${JSON.stringify(line)}`;
    }
    const addr = parseHostPort(w[2]);
    if (addr === undefined) return `Invalid address ${JSON.stringify(w[2])}`;
    const key = vsKey({ ...addr, protocol });
    const entry = this.#table.get(key);
    const opts = new Map<string, string>();
    for (let i = 3; i < w.length; i++) {
      const o = w[i];
      if (o === "-m") continue;
      if (!["-s", "-p", "-b", "-r", "-w"].includes(o)) return `invalid option ${o}`;
      const v = w[i + 1];
      if (o === "-p" && (v === undefined || v.startsWith("-"))) {
        opts.set(o, "360"); // ipvsadm's default persistence timeout
        continue;
      }
      if (v === undefined) return `option ${o} needs a value`;
      opts.set(o, v);
      i++;
    }
    if (op === "-A" || op === "-E") {
      const scheduler = opts.get("-s") ?? "wlc";
      if (op === "-A" && entry !== undefined) return "Service already exists";
      if (!KERNEL_SCHEDULERS.has(scheduler)) return "Scheduler or persistence engine not found";
      const flags = opts.has("-b") ? opts.get("-b")!.split(",") : [];
      if (!flags.every((f) => SCHED_FLAGS.has(f))) return `invalid scheduler flags ${opts.get("-b")}`;
      const p = opts.get("-p");
      const vs: VirtualServer = {
        ...addr,
        protocol,
        scheduler,
        flags,
        ...(p === undefined ? {} : { persistentTimeout: Number(p) }),
      };
      if (op === "-A") {
        if (entry !== undefined) return "Service already exists";
        this.#table.set(key, { vs, reals: new Map(), stats: NO_STATS });
      } else {
        if (entry === undefined) return "No such service";
        entry.vs = vs;
      }
      return undefined;
    }
    if (op === "-D") {
      if (entry === undefined) return "No such service";
      this.#table.delete(key);
      return undefined;
    }
    if (entry === undefined) return "Service not defined";
    const r = parseHostPort(opts.get("-r") ?? "");
    if (r === undefined) return `Invalid real server ${JSON.stringify(opts.get("-r"))}`;
    const rk = rsKey(r);
    const existing = entry.reals.get(rk);
    const weight = Number(opts.get("-w") ?? 1);
    if (op === "-a") {
      if (existing !== undefined) return "Destination already exists";
      entry.reals.set(rk, { ...r, weight, active: 0, inactive: 0 });
    } else if (op === "-e") {
      if (existing === undefined) return "No such destination";
      Object.assign(existing, { weight });
    } else {
      if (existing === undefined) return "No such destination";
      entry.reals.delete(rk);
    }
    return undefined;
  }
}

function opt(p: IpvsProtocol): string {
  return p === "tcp" ? "-t" : p === "udp" ? "-u" : "--sctp-service";
}

function parseHostPort(s: string): { address: string; port: number } | undefined {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d+)$/.exec(s) ?? /^([0-9.]+):(\d+)$/.exec(s);
  if (m === null || addressFamily(m[1]) === undefined) return undefined;
  const port = Number(m[2]);
  return port >= 0 && port <= 65535 ? { address: m[1], port } : undefined;
}
