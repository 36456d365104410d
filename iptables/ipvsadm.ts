/**
 * IPVS through `ipvsadm`, as upstream's utilipvs sees it: virtual servers and their real servers.
 * The whole table is read with `ipvsadm -S -n` (connection counts with `-L -n`, traffic counters
 * with `-L -n --stats --exact`); changes go in one `ipvsadm -R` batch per sync. Never the
 * `ipvsadm-restore` script: Debian's runs `ipvsadm -C` first, wiping virtual servers not ours.
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";
import { addressFamily } from "./ip.ts";

/** A virtual server's transport, as ipvsadm names its option. */
export type IpvsProtocol = "tcp" | "udp" | "sctp";

/** A virtual server: one address, protocol and port. */
export interface VirtualServer {
  readonly address: string;
  readonly protocol: IpvsProtocol;
  readonly port: number;
  /** `rr`, `wrr`, `lc`, `wlc`, `lblc`, `lblcr`, `dh`, `sh`, `sed`, `nq`, `mh`. */
  readonly scheduler: string;
  /** Scheduler flags as `flag-1`, `flag-2`, `flag-3` (ipvsadm prints sh/mh ones by other names). */
  readonly flags: readonly string[];
  /** Persistence (ClientIP affinity) timeout in seconds; undefined: not persistent. */
  readonly persistentTimeout?: number;
}

/** A real server of a virtual server (masquerading, as kube-proxy uses). */
export interface RealServer {
  readonly address: string;
  readonly port: number;
  readonly weight: number;
}

/** A virtual server with its real servers, as the kernel holds them. */
export interface IpvsService {
  readonly vs: VirtualServer;
  readonly reals: readonly RealServer[];
}

/** Connection counts of one real server (`ipvsadm -L -n`). */
export interface RealServerConnections {
  readonly active: number;
  readonly inactive: number;
}

/** Traffic counters of one virtual server (`ipvsadm -L -n --stats --exact`). */
export interface IpvsStats {
  readonly connections: number;
  readonly packetsIn: number;
  readonly packetsOut: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
}

/** The operations the ipvs mode needs. */
export interface IPVS {
  /** The whole table. */
  read(): Promise<IpvsService[]>;
  /** Active and inactive connections per real server, keyed `vsKey|rsKey`. */
  connections(): Promise<Map<string, RealServerConnections>>;
  /** Traffic counters per virtual server, keyed by {@linkcode vsKey}. */
  stats(): Promise<Map<string, IpvsStats>>;
  /**
   * Applies batch lines (built with the functions below) in one `ipvsadm -R`. ipvsadm skips a
   * failing line and goes on (its exit code is the last line's): a failure is any message on
   * stderr, and callers re-read the table after one.
   * @throws {IpvsError} with ipvsadm's messages.
   */
  apply(lines: readonly string[], signal?: AbortSignal): Promise<void>;
  /** Sets the IPVS connection timeouts in seconds (0 keeps the current value). */
  setTimeouts(tcp: number, tcpFin: number, udp: number): Promise<void>;
}

/** A batch failed; `line` is the batch line ipvsadm stopped at, when known. */
export class IpvsError extends ExecError {
  /** @param line the failing batch line. */
  constructor(message: string, code: number, readonly line?: string, options?: ErrorOptions) {
    super(message, code, options);
    this.name = "IpvsError";
  }
}

/**
 * What a scheduler name (`-s`) may look like in a batch: a lower-case word. Which names exist is the
 * kernel's to say (ipvsadm answers "Scheduler or persistence engine not found").
 */
const SCHEDULER_NAME = /^[a-z]{1,15}$/;

/** The scheduler flags ipvsadm takes (`-b`). */
export const SCHED_FLAGS: ReadonlySet<string> = new Set(["flag-1", "flag-2", "flag-3"]);

/** `ip:port` (`[ip]:port` for IPv6), as ipvsadm writes and reads addresses. */
export function hostPort(address: string, port: number): string {
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}

/** The key of a virtual server: `TCP/10.0.0.1:80`. */
export function vsKey(vs: Pick<VirtualServer, "address" | "protocol" | "port">): string {
  return `${vs.protocol.toUpperCase()}/${hostPort(vs.address, vs.port)}`;
}

/** The key of a real server: `10.1.0.1:8080`. */
export function rsKey(rs: Pick<RealServer, "address" | "port">): string {
  return hostPort(rs.address, rs.port);
}

const PROTO_OPTION: Record<IpvsProtocol, string> = { tcp: "-t", udp: "-u", sctp: "--sctp-service" };

/** `-t 10.0.0.1:80`: the option naming a virtual server, checked so no field can inject text. */
function service(vs: Pick<VirtualServer, "address" | "protocol" | "port">): string {
  checkEndpoint(vs.address, vs.port);
  const opt = PROTO_OPTION[vs.protocol];
  if (opt === undefined) throw new IpvsError(`ipvs: bad protocol ${JSON.stringify(vs.protocol)}`, -1);
  return `${opt} ${hostPort(vs.address, vs.port)}`;
}

function checkEndpoint(address: string, port: number): void {
  if (addressFamily(address) === undefined || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new IpvsError(`ipvs: bad address ${JSON.stringify(address)} port ${JSON.stringify(port)}`, -1);
  }
}

function options(vs: VirtualServer): string {
  if (!SCHEDULER_NAME.test(vs.scheduler)) {
    throw new IpvsError(`ipvs: bad scheduler ${JSON.stringify(vs.scheduler)}`, -1);
  }
  let s = ` -s ${vs.scheduler}`;
  if (vs.persistentTimeout !== undefined) {
    if (!Number.isInteger(vs.persistentTimeout) || vs.persistentTimeout < 1) {
      throw new IpvsError(`ipvs: bad persistence timeout ${vs.persistentTimeout}`, -1);
    }
    s += ` -p ${vs.persistentTimeout}`;
  }
  if (vs.flags.length > 0) {
    if (!vs.flags.every((f) => SCHED_FLAGS.has(f))) throw new IpvsError(`ipvs: bad flags ${vs.flags}`, -1);
    s += ` -b ${[...vs.flags].sort().join(",")}`;
  }
  return s;
}

/** The batch line adding `vs`. */
export function addVirtualServer(vs: VirtualServer): string {
  return `-A ${service(vs)}${options(vs)}`;
}

/** The batch line changing `vs`'s scheduler, flags or persistence. */
export function editVirtualServer(vs: VirtualServer): string {
  return `-E ${service(vs)}${options(vs)}`;
}

/** The batch line deleting a virtual server (and its real servers). */
export function deleteVirtualServer(vs: Pick<VirtualServer, "address" | "protocol" | "port">): string {
  return `-D ${service(vs)}`;
}

function real(rs: RealServer): string {
  checkEndpoint(rs.address, rs.port);
  if (!Number.isInteger(rs.weight) || rs.weight < 0 || rs.weight > 65535) {
    throw new IpvsError(`ipvs: bad weight ${JSON.stringify(rs.weight)}`, -1);
  }
  return `-r ${rsKey(rs)} -m -w ${rs.weight}`;
}

/** The batch line adding real server `rs` to `vs`. */
export function addRealServer(
  vs: Pick<VirtualServer, "address" | "protocol" | "port">,
  rs: RealServer,
): string {
  return `-a ${service(vs)} ${real(rs)}`;
}

/** The batch line changing `rs`'s weight. */
export function editRealServer(
  vs: Pick<VirtualServer, "address" | "protocol" | "port">,
  rs: RealServer,
): string {
  return `-e ${service(vs)} ${real(rs)}`;
}

/** The batch line removing real server `rs` from `vs`. */
export function deleteRealServer(
  vs: Pick<VirtualServer, "address" | "protocol" | "port">,
  rs: Pick<RealServer, "address" | "port">,
): string {
  checkEndpoint(rs.address, rs.port);
  return `-d ${service(vs)} -r ${rsKey(rs)}`;
}

/** Splits `[ip]:port` / `ip:port`. */
function splitHostPort(s: string): { address: string; port: number } {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d+)$/.exec(s) ?? /^([0-9.]+):(\d+)$/.exec(s);
  if (m === null) throw new IpvsError(`ipvs: cannot read address ${JSON.stringify(s)}`, -1);
  return { address: m[1], port: Number(m[2]) };
}

/** ipvsadm's names for the sh and mh schedulers' flags, back to `flag-N`. */
const FLAG_NAMES: Record<string, string> = {
  "sh-fallback": "flag-1",
  "sh-port": "flag-2",
  "mh-fallback": "flag-1",
  "mh-port": "flag-2",
};

/**
 * Parses `ipvsadm -S -n` (what `-R` reads back). ipvsadm prints flag-3 of sh and mh as an empty
 * `-b`; it reads back as flag-3.
 */
export function parseSave(text: string): IpvsService[] {
  const out: Array<{ vs: VirtualServer; reals: RealServer[] }> = [];
  const byKey = new Map<string, RealServer[]>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const words = line.trim().split(/\s+/);
    const op = words[0];
    const protoOpt = words[1];
    const protocol = protoOpt === "-t"
      ? "tcp"
      : protoOpt === "-u"
      ? "udp"
      : protoOpt === "--sctp-service"
      ? "sctp"
      : undefined;
    if (protocol === undefined) throw new IpvsError(`ipvs: cannot read line ${JSON.stringify(line)}`, -1);
    const { address, port } = splitHostPort(words[2]);
    const opt = (name: string) => {
      const i = words.indexOf(name);
      return i < 0 ? undefined : words[i + 1] ?? "";
    };
    if (op === "-A") {
      const b = opt("-b");
      const flags = b === undefined
        ? []
        : b === ""
        ? ["flag-3"]
        : b.split(",").map((f) => FLAG_NAMES[f] ?? f);
      const p = opt("-p");
      const vs: VirtualServer = {
        address,
        protocol,
        port,
        scheduler: opt("-s") ?? "wlc",
        flags,
        ...(p === undefined ? {} : { persistentTimeout: Number(p) }),
      };
      const reals: RealServer[] = [];
      byKey.set(vsKey(vs), reals);
      out.push({ vs, reals });
    } else if (op === "-a") {
      const reals = byKey.get(vsKey({ address, protocol, port }));
      const r = opt("-r");
      if (reals === undefined || r === undefined) {
        throw new IpvsError(`ipvs: cannot read line ${JSON.stringify(line)}`, -1);
      }
      reals.push({ ...splitHostPort(r), weight: Number(opt("-w") ?? 1) });
    } else {
      throw new IpvsError(`ipvs: cannot read line ${JSON.stringify(line)}`, -1);
    }
  }
  return out;
}

/** The `TCP  10.0.0.1:80 ...` / `  -> 10.1.0.1:8080 ...` rows of an `ipvsadm -L -n` listing. */
function* listRows(text: string): Generator<{ vs?: string; rs?: string; cols: string[] }> {
  let current: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^(TCP|UDP|SCTP)\s+(\S+)\s*(.*)$/.exec(line);
    if (m !== null) {
      const { address, port } = splitHostPort(m[2]);
      current = `${m[1]}/${hostPort(address, port)}`;
      yield { vs: current, cols: m[3].trim().split(/\s+/) };
      continue;
    }
    const r = /^\s+->\s+(\S+)\s+(.*)$/.exec(line);
    if (r !== null && current !== undefined && r[1] !== "RemoteAddress:Port") {
      yield { vs: current, rs: r[1], cols: r[2].trim().split(/\s+/) };
    }
  }
}

/** Parses `ipvsadm -L -n`: connections per `vsKey|rsKey`. */
export function parseConnections(text: string): Map<string, RealServerConnections> {
  const out = new Map<string, RealServerConnections>();
  for (const row of listRows(text)) {
    if (row.rs === undefined) continue;
    // Forward Weight ActiveConn InActConn
    out.set(`${row.vs}|${row.rs}`, { active: Number(row.cols[2]), inactive: Number(row.cols[3]) });
  }
  return out;
}

/** Parses `ipvsadm -L -n --stats --exact`: counters per virtual server. */
export function parseStats(text: string): Map<string, IpvsStats> {
  const out = new Map<string, IpvsStats>();
  for (const row of listRows(text)) {
    if (row.rs !== undefined) continue;
    const [connections, packetsIn, packetsOut, bytesIn, bytesOut] = row.cols.map(Number);
    out.set(row.vs!, { connections, packetsIn, packetsOut, bytesIn, bytesOut });
  }
  return out;
}

/** ipvsadm through an executor. */
export class IpvsadmRunner implements IPVS {
  readonly #exec: Executor;

  /** Runs nothing until asked. */
  constructor(opts: { exec: Executor }) {
    this.#exec = opts.exec;
  }

  async #run(args: string[], stdin?: string, signal?: AbortSignal): Promise<string> {
    const r = await this.#exec.run("ipvsadm", { args, stdin, signal });
    if (r.code !== 0) {
      throw new IpvsError(`ipvsadm ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`, r.code);
    }
    return r.stdout;
  }

  /** @inheritdoc */
  async read(): Promise<IpvsService[]> {
    return parseSave(await this.#run(["-S", "-n"]));
  }

  /** @inheritdoc */
  async connections(): Promise<Map<string, RealServerConnections>> {
    return parseConnections(await this.#run(["-L", "-n"]));
  }

  /** @inheritdoc */
  async stats(): Promise<Map<string, IpvsStats>> {
    return parseStats(await this.#run(["-L", "-n", "--stats", "--exact"]));
  }

  /** @inheritdoc */
  async apply(lines: readonly string[], signal?: AbortSignal): Promise<void> {
    if (lines.length === 0) return;
    const r = await this.#exec.run("ipvsadm", { args: ["-R"], stdin: lines.join("\n") + "\n", signal });
    const messages = r.stderr.trim();
    if (r.code === 0 && messages === "") return;
    // ipvsadm names each problem ("Service already exists"), not the line it came from.
    throw new IpvsError(`ipvsadm -R: ${messages.split("\n").join("; ") || `exited ${r.code}`}`, r.code);
  }

  /** @inheritdoc */
  async setTimeouts(tcp: number, tcpFin: number, udp: number): Promise<void> {
    await this.#run(["--set", String(tcp), String(tcpFin), String(udp)]);
  }
}
