import { assert, assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { DebugUnavailable } from "../healthcheck/metrics_server.ts";
import type { FamilyView } from "../family_view.ts";
import type { ModeTracer } from "../trace/packet.ts";
import type { CheckAsked } from "./datapath_check.ts";
import { DatapathWorkers } from "./datapath_workers.ts";

/**
 * A worker that answers each job with one trace per query after `ms` (never, for a negative `ms`),
 * counting how many run at once through a shared buffer.
 */
function spawner(ms: number, running: Int32Array, most: Int32Array): () => Worker {
  const src = `self.onmessage = (e) => {
    const [running, most] = [new Int32Array(e.data.running), new Int32Array(e.data.most)];
    const now = Atomics.add(running, 0, 1) + 1;
    if (now > Atomics.load(most, 0)) Atomics.store(most, 0, now);
    if (${ms} < 0) return;
    setTimeout(() => {
      Atomics.sub(running, 0, 1);
      self.postMessage({ results: e.data.job.queries.map(() => ({ endpoints: ["10.180.0.1:80"], reach: [],
        masq: false, masqMixed: false, redirects: [], affinity: false, verdict: "DNAT", path: [],
        unsupported: [], marked: false })) });
    }, ${ms});
  };`;
  return () => {
    const w = new Worker(`data:text/javascript,${encodeURIComponent(src)}`, { type: "module" });
    const post = w.postMessage.bind(w);
    // The job goes with the counters' shared memory.
    w.postMessage = (job: unknown) => post({ job, running: running.buffer, most: most.buffer });
    return w;
  };
}

const tracer: ModeTracer = { name: "nftables", trace: () => Promise.reject(new Error("not in this thread")) };
const view = { family: "IPv4", nodeIPs: ["192.168.0.2"] } as unknown as FamilyView;
const asked: CheckAsked[] = [{
  client: {
    kind: "pod",
    via: "cluster IP",
    label: "a pod on this node",
    connection: { src: "10.180.0.9", dst: "172.30.0.1", port: 80, protocol: "tcp" },
  },
  view,
}];

Deno.test("datapath workers: a report's traces come back from a worker, reports one at a time", async () => {
  const running = new Int32Array(new SharedArrayBuffer(4));
  const most = new Int32Array(new SharedArrayBuffer(4));
  const workers = new DatapathWorkers({
    signal: new AbortController().signal,
    toolTimeoutMs: 1000,
    spawn: spawner(150, running, most),
  });
  const check = workers.check({ tracer, config: { iptablesBackend: "auto" } });
  const answers = await Promise.all([check(asked), check(asked), check(asked)]);
  for (const a of answers) {
    assertEquals(a.map((x) => [x?.verdict, x?.endpoints, x?.by]), [[
      "DNAT",
      ["10.180.0.1:80"],
      "the nftables rules",
    ]]);
  }
  assertEquals(most[0], 1, "never two workers at once");
});

Deno.test("datapath workers: a late report is 503 with the reason, and the next one still runs", async () => {
  const running = new Int32Array(new SharedArrayBuffer(4));
  const most = new Int32Array(new SharedArrayBuffer(4));
  let slow = true;
  const never = spawner(-1, running, most);
  const quick = spawner(10, running, most);
  const workers = new DatapathWorkers({
    signal: new AbortController().signal,
    toolTimeoutMs: 1000,
    deadlineMs: 300,
    spawn: () => slow ? never() : quick(),
  });
  const check = workers.check({ tracer, config: { iptablesBackend: "auto" } });
  const e = await assertRejects(() => check(asked), DebugUnavailable);
  assert(/took longer than 0.3 s/.test((e as Error).message), (e as Error).message);
  slow = false;
  assertEquals((await check(asked))[0]?.verdict, "DNAT");
});

Deno.test("datapath workers: the program's stop fails the running report and the waiting ones at once", async () => {
  const running = new Int32Array(new SharedArrayBuffer(4));
  const most = new Int32Array(new SharedArrayBuffer(4));
  const stop = new AbortController();
  const workers = new DatapathWorkers({
    signal: stop.signal,
    toolTimeoutMs: 1000,
    deadlineMs: 60_000,
    spawn: spawner(-1, running, most),
  });
  const check = workers.check({ tracer, config: { iptablesBackend: "auto" } });
  const first = check(asked);
  const second = check(asked);
  await new Promise((r) => setTimeout(r, 100));
  const start = performance.now();
  stop.abort();
  for (const p of [first, second]) {
    const e = await assertRejects(() => p, DebugUnavailable);
    assertEquals((e as Error).message, "the proxy is shutting down");
  }
  assert(performance.now() - start < 500, "failed at once");
});

Deno.test("datapath workers: the sockets' own answers need no worker", async () => {
  const workers = new DatapathWorkers({
    signal: new AbortController().signal,
    toolTimeoutMs: 1000,
    spawn: () => {
      throw new Error("no worker is needed");
    },
  });
  const own = { verdict: "REJECT" as const, endpoints: [], rules: [], by: "the loopback socket proxy" };
  const check = workers.check({ tracer, config: { iptablesBackend: "auto" }, answer: () => own });
  assertEquals(await check(asked), [own]);
});
