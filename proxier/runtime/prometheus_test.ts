import { assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import { Counter, exponentialBuckets, Gauge, Histogram, linearBuckets, Registry } from "./prometheus.ts";

Deno.test("prometheus: the text exposition format, as Prometheus (and prom-client) write it", async () => {
  const registry = new Registry();
  const registers = [registry];
  const syncs = new Histogram({
    name: "sync_seconds",
    help: "Sync latency\nin seconds",
    labelNames: ["ip_family"] as const,
    buckets: [0.5, 0.25, 1],
    registers,
  });
  const failures = new Counter({
    name: "failures_total",
    help: "Failures",
    labelNames: ["ip_family"],
    registers,
  });
  const pending = new Gauge({ name: "pending", help: "Pending", registers });
  let scraped = 0;
  new Gauge({
    name: "scraped",
    help: 'Set at "scrape" time \\ here',
    registers,
    collect() {
      this.set(++scraped);
    },
  });
  syncs.labels({ ip_family: "IPv4" }).observe(0.3);
  syncs.observe({ ip_family: "IPv4" }, 2);
  failures.labels({ ip_family: 'v"6' }).inc();
  failures.inc({ ip_family: 'v"6' }, 2);
  pending.set(-1.5);
  assertEquals(
    await registry.metrics(),
    [
      "# HELP sync_seconds Sync latency\\nin seconds",
      "# TYPE sync_seconds histogram",
      'sync_seconds_bucket{le="0.25",ip_family="IPv4"} 0',
      'sync_seconds_bucket{le="0.5",ip_family="IPv4"} 1',
      'sync_seconds_bucket{le="1",ip_family="IPv4"} 1',
      'sync_seconds_bucket{le="+Inf",ip_family="IPv4"} 2',
      'sync_seconds_sum{ip_family="IPv4"} 2.3',
      'sync_seconds_count{ip_family="IPv4"} 2',
      "",
      "# HELP failures_total Failures",
      "# TYPE failures_total counter",
      'failures_total{ip_family="v\\"6"} 3',
      "",
      "# HELP pending Pending",
      "# TYPE pending gauge",
      "pending -1.5",
      "",
      '# HELP scraped Set at "scrape" time \\\\ here',
      "# TYPE scraped gauge",
      "scraped 1",
      "",
    ].join("\n"),
  );
  assertEquals((await registry.metrics()).includes("scraped 2"), true);
  // A histogram without labels starts at zero; reset forgets labelled series.
  const h = new Histogram({ name: "h", help: "h", buckets: [1] });
  assertEquals(h.samples().map((s) => `${s.name}{${s.labels}} ${s.value}`), [
    'h_bucket{le="1"} 0',
    'h_bucket{le="+Inf"} 0',
    "h_sum{} 0",
    "h_count{} 0",
  ]);
  failures.reset();
  assertEquals(failures.samples(), []);
});

Deno.test("prometheus: what prom-client refuses is refused", () => {
  const registry = new Registry();
  const c = new Counter({ name: "c_total", help: "c", labelNames: ["a"], registers: [registry] });
  assertMatch(assertThrows(() => c.inc(-1), Error).message, /decrease/);
  assertMatch(assertThrows(() => c.inc({ b: "x" } as never), Error).message, /not included/);
  assertMatch(
    assertThrows(() => new Counter({ name: "c_total", help: "again", registers: [registry] }), Error).message,
    /already/,
  );
  assertEquals(registry.getSingleMetric("c_total"), c);
  assertEquals(linearBuckets(0.25, 0.25, 3), [0.25, 0.5, 0.75]);
  assertEquals(exponentialBuckets(0.001, 2, 4), [0.001, 0.002, 0.004, 0.008]);
});

Deno.test("prometheus: a bound gauge keeps to the labels it was bound with, across a reset", () => {
  const g = new Gauge({ name: "g", help: "g", labelNames: ["ip_family"] });
  const labels = { ip_family: "IPv4" };
  const v4 = g.labels(labels);
  // The caller's object changing afterwards does not move the bound series.
  labels.ip_family = "IPv6";
  v4.set(3);
  v4.inc(2);
  g.set({ ip_family: "IPv6" }, 1);
  const lines = () => g.samples().map((s) => `${s.labels} ${s.value}`).sort();
  assertEquals(lines(), ['ip_family="IPv4" 5', 'ip_family="IPv6" 1']);
  g.reset();
  assertEquals(lines(), []);
  v4.set(7);
  assertEquals(lines(), ['ip_family="IPv4" 7']);
  // The unlabelled series of a gauge without labels, set again and again, stays one series.
  const plain = new Gauge({ name: "p", help: "p" });
  plain.set(1);
  plain.set(2);
  plain.inc();
  assertEquals(plain.samples().map((s) => `{${s.labels}} ${s.value}`), ["{} 3"]);
  assertMatch(assertThrows(() => g.labels({ zone: "a" } as never), Error).message, /not included/);
});
