/**
 * The conntrack table through conntrack(8): list the flows of a protocol, delete flows by their
 * tuple (one `conntrack -R` batch per sync). The conntrack reconciler (`proxier/conntrack/`) uses
 * them so UDP and SCTP clients are not pinned to endpoints that went away.
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";
import type { IPFamily } from "./ip.ts";

/** The connectionless protocols whose flows outlive their endpoints. */
export type FlowProtocol = "udp" | "sctp";

/** One flow: its original direction and where the reply comes from (the DNAT target). */
export interface ConntrackFlow {
  readonly protocol: FlowProtocol;
  readonly origSrc: string;
  readonly origDst: string;
  readonly origSport: number;
  readonly origDport: number;
  /** The reply's source: the endpoint when the flow was DNATed, else `origDst`. */
  readonly replySrc: string;
  readonly replySport: number;
}

/**
 * The flows one deletion removes: those whose replies come from `replySrc:replySport`, to
 * `origDst:origDport` only when given. (Each deletion makes conntrack(8) walk the whole table: the
 * fewer, the better.)
 */
export interface FlowFilter {
  readonly protocol: FlowProtocol;
  readonly origDst?: string;
  readonly origDport?: number;
  readonly replySrc: string;
  readonly replySport: number;
}

/** What the proxiers need of the conntrack table, for one family. */
export interface Conntrack {
  /** Returns this family's flows of `protocol`. */
  list(protocol: FlowProtocol): Promise<ConntrackFlow[]>;
  /** Deletes every flow each filter matches, in one batch. */
  delete(filters: readonly FlowFilter[]): Promise<void>;
}

/**
 * Returns the flows of `conntrack -L` output (`proto num ttl src= dst= sport= dport= ... src= dst=
 * sport= dport= ...`): the first tuple is the original direction, the second the reply.
 */
export function parseConntrackList(text: string, protocol: FlowProtocol): ConntrackFlow[] {
  const out: ConntrackFlow[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith(protocol)) continue;
    const v = (key: string) => [...line.matchAll(new RegExp(`\\b${key}=(\\S+)`, "g"))].map((m) => m[1]);
    const [src, dst, sport, dport] = [v("src"), v("dst"), v("sport"), v("dport")];
    if (src.length < 2 || dst.length < 2 || sport.length < 2 || dport.length < 2) continue;
    out.push({
      protocol,
      origSrc: src[0],
      origDst: dst[0],
      origSport: Number(sport[0]),
      origDport: Number(dport[0]),
      replySrc: src[1],
      replySport: Number(sport[1]),
    });
  }
  return out;
}

/**
 * The file `conntrack -R` reads a batch from: its stdin, named through /proc (what /dev/stdin links
 * to), since a minimal init's /dev lacks that link.
 */
export const STDIN_FILE = "/proc/self/fd/0";

/** conntrack(8) through an executor. */
export class ConntrackRunner implements Conntrack {
  readonly #exec: Executor;
  readonly #family: string[];

  /** Runs nothing until asked. */
  constructor(opts: { exec: Executor; family: IPFamily }) {
    this.#exec = opts.exec;
    this.#family = opts.family === "IPv6" ? ["-f", "ipv6"] : [];
  }

  /** @inheritdoc */
  async list(protocol: FlowProtocol): Promise<ConntrackFlow[]> {
    const args = ["-L", "-p", protocol, ...this.#family];
    const r = await this.#exec.run("conntrack", { args });
    if (r.code !== 0) {
      throw new ExecError(`conntrack ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`, r.code);
    }
    return parseConntrackList(r.stdout, protocol);
  }

  /** @inheritdoc */
  async delete(filters: readonly FlowFilter[]): Promise<void> {
    if (filters.length === 0) return;
    const lines = filters.map((f) =>
      [
        "-D",
        "-p",
        f.protocol,
        ...this.#family,
        ...(f.origDst === undefined ? [] : ["--orig-dst", f.origDst]),
        ...(f.origDport === undefined ? [] : ["--orig-port-dst", String(f.origDport)]),
        "--reply-src",
        f.replySrc,
        "--reply-port-src",
        String(f.replySport),
      ].join(" ")
    );
    const r = await this.#exec.run("conntrack", {
      args: ["-R", STDIN_FILE],
      stdin: lines.join("\n") + "\n",
    });
    if (r.code !== 0) {
      throw new ExecError(
        `conntrack -R (${filters.length} deletions) exited ${r.code}: ${r.stderr.trim()}`,
        r.code,
      );
    }
  }
}
