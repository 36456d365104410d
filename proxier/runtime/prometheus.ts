/**
 * Prometheus metrics in the text exposition format (0.0.4): counters, gauges and histograms with
 * labels, on registries of our own. The subset of prom-client's API this program uses, with its
 * output, written here because prom-client's module graph costs megabytes of resident memory on
 * every node for what is a few counters and histograms.
 * @module
 */

/** A series' labels. */
export type Labels<N extends string = string> = Partial<Record<N, string | number>>;

/** What a metric is built from (prom-client's configuration shape). */
export interface MetricConfig<N extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly N[];
  /** Registries it renders on; none: it is only written (tests). */
  readonly registers?: readonly Registry[];
  /** Runs before each rendering, `this` the metric: sets values read at scrape time. */
  // deno-lint-ignore no-explicit-any
  readonly collect?: (this: any) => void | Promise<void>;
}

/** One rendered line's name, labels and value. */
interface Sample {
  readonly name: string;
  readonly labels: string;
  readonly value: number;
}

function escape(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function formatLabels(labels: Labels): string {
  return Object.entries(labels).filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}="${typeof v === "string" ? escape(v).replace(/"/g, '\\"') : v}"`).join(",");
}

/** True when `labels` has no key (the unlabelled series). */
function isEmpty(labels: Labels): boolean {
  for (const _ in labels) return false;
  return true;
}

/** A label set's key: the same labels in any order are one series. */
function keyOf(labels: Labels): string {
  return Object.keys(labels).sort().map((k) => `${k}:${labels[k as keyof typeof labels]}`).join("|");
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "Nan";
  if (!Number.isFinite(v)) return v < 0 ? "-Inf" : "+Inf";
  return `${v}`;
}

/** The metrics `/metrics` renders, in registration order. */
export class Registry {
  readonly #metrics = new Map<string, Metric<string>>();

  /** The exposition format's content type. */
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";

  /** Adds `metric`; a different metric of the same name throws. */
  registerMetric(metric: Metric<string>): void {
    const had = this.#metrics.get(metric.name);
    if (had !== undefined && had !== metric) {
      throw new Error(`A metric with the name ${metric.name} has already been registered.`);
    }
    this.#metrics.set(metric.name, metric);
  }

  /** The metric registered as `name`, if any. */
  getSingleMetric(name: string): Metric<string> | undefined {
    return this.#metrics.get(name);
  }

  /** Renders every metric (their collects run together first). */
  async metrics(): Promise<string> {
    const parts = await Promise.all([...this.#metrics.values()].map(async (m) => {
      await m.collect?.call(m);
      const lines = [`# HELP ${escape(m.name)} ${escape(m.help)}`, `# TYPE ${escape(m.name)} ${m.type}`];
      for (const s of m.samples()) {
        lines.push(`${s.name}${s.labels === "" ? "" : `{${s.labels}}`} ${formatValue(s.value)}`);
      }
      return lines.join("\n");
    }));
    return `${parts.join("\n\n")}\n`;
  }
}

/** What counters, gauges and histograms share: the series by label set. */
abstract class Metric<N extends string, V = number> {
  readonly name: string;
  readonly help: string;
  abstract readonly type: string;
  readonly collect?: (this: unknown) => void | Promise<void>;
  protected readonly labelNames: readonly N[];
  protected series = new Map<string, { labels: Labels<N>; value: V }>();

  constructor(config: MetricConfig<N>) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames ?? [];
    this.collect = config.collect;
    for (const r of config.registers ?? []) r.registerMetric(this as unknown as Metric<string>);
  }

  /** Forgets every series (a metric without labels starts again from its zero). */
  reset(): void {
    this.series.clear();
    if (this.labelNames.length === 0) this.#entry({});
  }

  protected abstract zero(): V;

  /** The series of `labels`, created at zero. */
  protected entry(labels: Labels<N>): { labels: Labels<N>; value: V } {
    // The unlabelled series is set on every object event: found without building its key.
    const plain = this.series.get("");
    if (plain !== undefined && isEmpty(labels)) return plain;
    this.#check(labels);
    return this.#entry(labels);
  }

  /** The series of `labels` as a bound metric finds it: the labels checked and keyed once. */
  protected bound(labels: Labels<N>): () => { labels: Labels<N>; value: V } {
    this.#check(labels);
    const fixed = { ...labels };
    const key = keyOf(fixed);
    return () => this.series.get(key) ?? this.#entry(fixed);
  }

  #check(labels: Labels<N>): void {
    for (const k of Object.keys(labels)) {
      if (!this.labelNames.includes(k as N)) {
        throw new Error(`Added label "${k}" is not included in initial labelset`);
      }
    }
  }

  #entry(labels: Labels<N>): { labels: Labels<N>; value: V } {
    const key = keyOf(labels);
    let e = this.series.get(key);
    if (e === undefined) this.series.set(key, e = { labels: { ...labels }, value: this.zero() });
    return e;
  }

  /** The lines this metric renders. */
  abstract samples(): Sample[];
}

/** A value that only goes up. */
export class Counter<N extends string = string> extends Metric<N> {
  readonly type = "counter";

  /** Builds it (registered on `config.registers`); without labels it starts at 0. */
  constructor(config: MetricConfig<N>) {
    super(config);
    this.reset();
  }

  protected zero(): number {
    return 0;
  }

  /** Adds `value` (default 1) to the series of `labels` (none: the unlabelled one). */
  inc(labels?: Labels<N> | number, value?: number): void {
    const [l, v] = typeof labels === "object" ? [labels, value ?? 1] : [{}, labels ?? 1];
    if (v < 0) throw new Error("It is not possible to decrease a counter");
    this.entry(l).value += v;
  }

  /** The counter bound to `labels`. */
  labels(labels: Labels<N>): { inc(value?: number): void } {
    return { inc: (value = 1) => this.inc(labels, value) };
  }

  /** The lines this metric renders. */
  samples(): Sample[] {
    return [...this.series.values()].map((e) => ({
      name: this.name,
      labels: formatLabels(e.labels),
      value: e.value,
    }));
  }
}

/** A value that goes up and down. */
export class Gauge<N extends string = string> extends Metric<N> {
  readonly type = "gauge";

  /** Builds it (registered on `config.registers`); without labels it starts at 0. */
  constructor(config: MetricConfig<N>) {
    super(config);
    this.reset();
  }

  protected zero(): number {
    return 0;
  }

  /** Sets the series of `labels` (none: the unlabelled one) to `value`. */
  set(labels: Labels<N> | number, value?: number): void {
    if (typeof labels === "number") this.entry({}).value = labels;
    else this.entry(labels).value = value!;
  }

  /** Adds `value` (default 1). */
  inc(labels?: Labels<N> | number, value?: number): void {
    const [l, v] = typeof labels === "object" ? [labels, value ?? 1] : [{}, labels ?? 1];
    this.entry(l).value += v;
  }

  /** The gauge bound to `labels`. */
  labels(labels: Labels<N>): { set(value: number): void; inc(value?: number): void } {
    const series = this.bound(labels);
    return {
      set: (value) => {
        series().value = value;
      },
      inc: (value = 1) => {
        series().value += value;
      },
    };
  }

  /** The lines this metric renders. */
  samples(): Sample[] {
    return [...this.series.values()].map((e) => ({
      name: this.name,
      labels: formatLabels(e.labels),
      value: e.value,
    }));
  }
}

/** Options of a {@linkcode Histogram}: its buckets' upper bounds. */
export interface HistogramConfig<N extends string> extends MetricConfig<N> {
  readonly buckets?: readonly number[];
}

interface HistogramValue {
  readonly counts: number[];
  sum: number;
  count: number;
}

/** Observations counted in buckets, with their sum and count. */
export class Histogram<N extends string = string> extends Metric<N, HistogramValue> {
  readonly type = "histogram";
  readonly #bounds: readonly number[];

  /** Builds it (registered on `config.registers`); default buckets are prom-client's. */
  constructor(config: HistogramConfig<N>) {
    super(config);
    this.#bounds = [...(config.buckets ?? [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])]
      .sort((a, b) => a - b);
    this.reset();
  }

  protected zero(): HistogramValue {
    return { counts: this.#bounds.map(() => 0), sum: 0, count: 0 };
  }

  /** Counts `value` in the series of `labels` (none: the unlabelled one). */
  observe(labels: Labels<N> | number, value?: number): void {
    const [l, v] = typeof labels === "number" ? [{}, labels] : [labels, value!];
    const e = this.entry(l).value;
    const i = this.#bounds.findIndex((b) => v <= b);
    if (i >= 0) e.counts[i]++;
    e.sum += v;
    e.count++;
  }

  /** The histogram bound to `labels`. */
  labels(labels: Labels<N>): { observe(value: number): void } {
    return { observe: (value) => this.observe(labels, value) };
  }

  /** The lines this metric renders: cumulative buckets (`le` first), `+Inf`, sum and count. */
  samples(): Sample[] {
    const out: Sample[] = [];
    for (const { labels, value } of this.series.values()) {
      const rest = formatLabels(labels);
      const withLe = (le: string) => rest === "" ? `le="${le}"` : `le="${le}",${rest}`;
      let acc = 0;
      this.#bounds.forEach((b, i) => {
        acc += value.counts[i];
        out.push({ name: `${this.name}_bucket`, labels: withLe(String(b)), value: acc });
      });
      out.push({ name: `${this.name}_bucket`, labels: withLe("+Inf"), value: value.count });
      out.push({ name: `${this.name}_sum`, labels: rest, value: value.sum });
      out.push({ name: `${this.name}_count`, labels: rest, value: value.count });
    }
    return out;
  }
}

/** `count` bounds from `start`, `width` apart. */
export function linearBuckets(start: number, width: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i * width);
}

/** `count` bounds from `start`, each `factor` times the one before. */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  // Multiplied in turn, not start * factor ** i: the same floating-point bounds as prom-client's.
  const out: number[] = [];
  for (let b = start; out.length < count; b *= factor) out.push(b);
  return out;
}
