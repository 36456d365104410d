/**
 * A stateful fake conntrack table for tests: holds flows of both families, lists and deletes them as
 * conntrack(8) does, and records every deletion batch.
 * @module
 */
import type { Conntrack, ConntrackFlow, FlowFilter, FlowProtocol } from "../conntrack.ts";
import { addressFamily, type IPFamily } from "../ip.ts";

/** The fake table; {@linkcode forFamily} gives each family's view, as the runner has one per family. */
export class FakeConntrack implements Conntrack {
  /** Every flow, both families. */
  flows: ConntrackFlow[] = [];
  /** Every deletion batch asked for, as `origDst:port <- replySrc:port` lines. */
  readonly batches: string[][] = [];
  readonly #family?: IPFamily;
  readonly #root?: FakeConntrack;

  /** An empty table (or, with `root`, one family's view of it). */
  constructor(root?: FakeConntrack, family?: IPFamily) {
    this.#root = root;
    this.#family = family;
  }

  /** Returns the view of `family`'s flows. */
  forFamily(family: IPFamily): FakeConntrack {
    return new FakeConntrack(this, family);
  }

  get #table(): FakeConntrack {
    return this.#root ?? this;
  }

  /** Adds a flow: from `src` to `dst`, DNATed to `to` (`ip:port`; default: not DNATed). */
  add(protocol: FlowProtocol, src: string, dst: string, to?: string): void {
    const [origSrc, origSport] = split(src);
    const [origDst, origDport] = split(dst);
    const [replySrc, replySport] = split(to ?? dst);
    this.#table.flows.push({ protocol, origSrc, origSport, origDst, origDport, replySrc, replySport });
  }

  /** @inheritdoc */
  list(protocol: FlowProtocol): Promise<ConntrackFlow[]> {
    return Promise.resolve(
      this.#table.flows.filter((f) =>
        f.protocol === protocol && (this.#family === undefined || addressFamily(f.origDst) === this.#family)
      ),
    );
  }

  /** @inheritdoc */
  delete(filters: readonly FlowFilter[]): Promise<void> {
    const t = this.#table;
    t.batches.push(
      filters.map((f) => `${f.origDst ?? "*"}:${f.origDport ?? "*"} <- ${f.replySrc}:${f.replySport}`),
    );
    const matches = (c: ConntrackFlow, f: FlowFilter) =>
      c.protocol === f.protocol && (f.origDst === undefined || c.origDst === f.origDst) &&
      (f.origDport === undefined || c.origDport === f.origDport) &&
      c.replySrc === f.replySrc && c.replySport === f.replySport;
    t.flows = t.flows.filter((c) => !filters.some((f) => matches(c, f)));
    return Promise.resolve();
  }
}

function split(hostPort: string): [string, number] {
  const i = hostPort.lastIndexOf(":");
  return [hostPort.slice(0, i).replace(/^\[|\]$/g, ""), Number(hostPort.slice(i + 1))];
}
