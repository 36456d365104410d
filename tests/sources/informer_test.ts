/**
 * The real client-node informers (through KubernetesSource) against the test API server.
 */
import { CONVERGE_MS } from "../support/bounds.ts";
import { realClock } from "../../proxier/runtime/clock.ts";
import type { ApiAccess } from "../../proxier/sources/api_access.ts";
import { FileSource } from "../../proxier/sources/file.ts";
import { KubernetesSource } from "../../proxier/sources/kubernetes.ts";
import { ApiClient } from "../../proxier/sources/api_client.ts";
import { type PrefetchedLists, prefetchLists } from "../../proxier/sources/first_lists.ts";
import { BaseProxier, type SyncContext } from "../../proxier/base_proxier.ts";
import { apiAccessTo, TestApiServer } from "../support/api_server.ts";
import { assert, assertEquals } from "../support/assert.ts";
import {
  baseOptions,
  ep,
  makeEndpointSlice,
  makeService,
  type MemoryLogger,
  NODE,
} from "../support/fixtures.ts";
import { eventually, serveTls } from "../support/net_helpers.ts";

/** A proxier that records what each sync would program. */
class RecordingProxier extends BaseProxier {
  state = new Map<string, string[]>();
  syncs = 0;
  override syncRules(ctx: SyncContext): Promise<void> {
    this.syncs++;
    this.state = new Map(
      [...ctx.services.keys()].map((k) => [k, (ctx.endpoints.get(k) ?? []).map((e) => e.key)]),
    );
    return Promise.resolve();
  }
  get nodeName_(): string | undefined {
    return this.node.node?.metadata?.name;
  }
  get cidrs(): readonly string[] {
    return this.serviceCIDRs;
  }
}

async function withSource(
  api: TestApiServer,
  fn: (p: RecordingProxier, log: MemoryLogger) => Promise<void>,
  prefetched?: PrefetchedLists,
  client?: (a: ApiAccess) => ApiClient,
) {
  const opts = baseOptions({ clock: realClock, minSyncPeriodMs: 0 });
  const p = new RecordingProxier(opts);
  const ac = new AbortController();
  const loop = p.syncLoop(ac.signal);
  const a = await apiAccessTo(api.url);
  const src = new KubernetesSource({
    access: a,
    api: client?.(a),
    prefetched,
    nodeName: NODE,
    handler: p,
    log: opts.log,
    clock: realClock,
  })
    .run(ac.signal);
  try {
    await fn(p, opts.log);
  } finally {
    ac.abort();
    await Promise.all([loop, src]);
  }
}

const state = (p: RecordingProxier) => Object.fromEntries(p.state);

Deno.test("informers: created, changed and deleted objects reach the proxier", async () => {
  const api = new TestApiServer();
  api.start();
  api.apply("services", makeService("ns1", "svc1"));
  api.apply("endpointslices", makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  api.apply("nodes", { metadata: { name: NODE } });
  api.apply("nodes", { metadata: { name: "node-b" } });
  try {
    await withSource(api, async (p) => {
      await eventually(() => assertEquals(state(p), { "ns1/svc1:p80/TCP": ["10.180.0.1:80"] }));
      await eventually(() => assertEquals(p.nodeName_, NODE));
      // Changes arrive through the watch.
      api.apply("services", makeService("ns1", "svc2", (s) => s.spec!.clusterIPs = ["172.30.0.42"]));
      api.apply(
        "endpointslices",
        makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1"), ep("10.180.0.2")]),
      );
      await eventually(() =>
        assertEquals(state(p), {
          "ns1/svc1:p80/TCP": ["10.180.0.1:80", "10.180.0.2:80"],
          "ns1/svc2:p80/TCP": [],
        })
      );
      api.delete("services", "ns1", "svc1");
      await eventually(() => assertEquals(state(p), { "ns1/svc2:p80/TCP": [] }));
      // kube-proxy's label selector: headless and other-proxy slices never arrive.
      api.apply(
        "endpointslices",
        makeEndpointSlice("ns1", "svc2", (s) => {
          s.metadata!.labels!["service.kubernetes.io/headless"] = "";
          s.endpoints = [ep("10.180.0.9")];
        }),
      );
      api.apply(
        "services",
        makeService("ns1", "svc3", (s) => {
          s.metadata!.labels = { "service.kubernetes.io/service-proxy-name": "other" };
        }),
      );
      api.apply("services", makeService("ns1", "svc4", (s) => s.spec!.clusterIPs = ["172.30.0.44"]));
      await eventually(() => assertEquals(state(p), { "ns1/svc2:p80/TCP": [], "ns1/svc4:p80/TCP": [] }));
    });
  } finally {
    await api.stop();
  }
});

Deno.test("informers: ServiceCIDRs reach the proxier (this family's CIDRs of every object)", async () => {
  const api = new TestApiServer();
  api.start();
  const cidr = (name: string, cidrs: string[]) => ({ metadata: { name }, spec: { cidrs } });
  api.apply("servicecidrs", cidr("kubernetes", ["172.30.0.0/16", "fd00:30::/108"]));
  try {
    await withSource(api, async (p) => {
      await eventually(() => assertEquals(p.cidrs, ["172.30.0.0/16"]));
      api.apply("servicecidrs", cidr("extra", ["10.200.0.0/24"]));
      await eventually(() => assertEquals(p.cidrs, ["10.200.0.0/24", "172.30.0.0/16"]));
      api.delete("servicecidrs", "", "kubernetes");
      await eventually(() => assertEquals(p.cidrs, ["10.200.0.0/24"]));
    });
  } finally {
    await api.stop();
  }
});

Deno.test("informers: an API server without ServiceCIDRs (before 1.33) is said once; everything else works", async () => {
  const api = new TestApiServer({ without: ["servicecidrs"] });
  api.start();
  api.apply("services", makeService("ns1", "svc1"));
  api.apply("endpointslices", makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  try {
    await withSource(api, async (p, log) => {
      await eventually(() => assertEquals(state(p), { "ns1/svc1:p80/TCP": ["10.180.0.1:80"] }));
      await new Promise((r) => setTimeout(r, 1500));
      assertEquals(
        log.records.filter((r) => r.level === "warn").map((r) => [r.msg, r.fields?.hint]),
        [[
          "Cannot list ServiceCIDRs; traffic to unallocated cluster IPs is not dropped (nftables mode)",
          "the API server predates networking.k8s.io/v1 ServiceCIDR (Kubernetes 1.33)",
        ]],
      );
      assertEquals(api.requestsOf.get("servicecidrs"), 1, "asked once, not retried");
    });
  } finally {
    await api.stop();
  }
});

Deno.test("informers: API server killed mid-watch, changed meanwhile, restarted: state converges", async () => {
  const api = new TestApiServer();
  api.start();
  api.apply("services", makeService("ns1", "svc1"));
  api.apply("services", makeService("ns1", "gone", (s) => s.spec!.clusterIPs = ["172.30.0.50"]));
  api.apply("endpointslices", makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  api.apply("services", makeService("ns1", "drained", (s) => s.spec!.clusterIPs = ["172.30.0.52"]));
  api.apply("endpointslices", makeEndpointSlice("ns1", "drained", (s) => s.endpoints = [ep("10.180.0.9")]));
  try {
    await withSource(api, async (p) => {
      await eventually(() => assertEquals(state(p)["ns1/drained:p80/TCP"], ["10.180.0.9:80"]));
      assertEquals(Object.keys(state(p)).length, 3);
      const watchesBefore = api.watchRequests;
      await api.stop();
      // While it is down: changes, and history compacted so the informers must relist (410).
      api.apply("endpointslices", makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.7")]));
      api.delete("services", "ns1", "gone");
      // Known only from the relist (no DELETED event): its endpoints must still go.
      api.delete("endpointslices", "ns1", "drained-abcde");
      api.apply("services", makeService("ns1", "new", (s) => s.spec!.clusterIPs = ["172.30.0.51"]));
      api.compact();
      await new Promise((r) => setTimeout(r, 300));
      assertEquals(Object.keys(state(p)).length, 3, "last known state kept while the server is away");
      const listsBefore = api.listRequests;
      api.start();
      await eventually(
        () =>
          assertEquals(state(p), {
            "ns1/svc1:p80/TCP": ["10.180.0.7:80"],
            "ns1/drained:p80/TCP": [],
            "ns1/new:p80/TCP": [],
          }),
        15_000,
      );
      assert(api.watchRequests > watchesBefore, "watches reconnected");
      assert(api.listRequests > listsBefore, "relisted after 410 Gone");
    });
  } finally {
    await api.stop();
  }
});

Deno.test("informers: a list the API server never answers is abandoned after the list timeout and retried", async () => {
  const api = new TestApiServer();
  api.start();
  api.apply("services", makeService("ns1", "svc1"));
  api.apply("endpointslices", makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  try {
    await withSource(
      api,
      async (p, log) => {
        await eventually(() => assertEquals(state(p), { "ns1/svc1:p80/TCP": ["10.180.0.1:80"] }));
        // Restarted with its history compacted: each watch resumes into 410 Gone and relists;
        // the EndpointSlices' relist hangs.
        await api.stop();
        api.apply(
          "endpointslices",
          makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.2")]),
        );
        api.compact();
        api.hangListOf = "endpointslices";
        await new Promise((r) => setTimeout(r, 300));
        api.start();
        await eventually(() => assertEquals(state(p), { "ns1/svc1:p80/TCP": ["10.180.0.2:80"] }), 10_000);
        assertEquals(api.hangListOf, undefined, "a list hung");
        assert(
          log.records.some((r) =>
            r.msg.startsWith("Watch failed") && /no answer within 0\.5 s/.test(String(r.fields?.error))
          ),
          "the abandoned list is said, with its cause",
        );
      },
      undefined,
      (a) => new ApiClient(a, { listTimeoutMs: 500 }),
    );
  } finally {
    await api.stop();
  }
});

Deno.test("informers: lists requested ahead (as main does while it starts) serve the first list, once, and are not kept", async () => {
  const api = new TestApiServer();
  api.start();
  api.apply("services", makeService("ns1", "svc1"));
  api.apply("endpointslices", makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.1")]));
  try {
    const prefetched = prefetchLists(new ApiClient(await apiAccessTo(api.url)), NODE);
    await prefetched.settled();
    assertEquals(api.listRequests, 3);
    assertEquals(prefetched.held, 4);
    // Changed after the prefetch: the watch, which starts from the prefetched list's version, brings it.
    api.apply("endpointslices", makeEndpointSlice("ns1", "svc1", (s) => s.endpoints = [ep("10.180.0.2")]));
    await withSource(api, async (p) => {
      await eventually(() => assertEquals(state(p), { "ns1/svc1:p80/TCP": ["10.180.0.2:80"] }));
      assertEquals(api.listRequests, 3, "no list asked twice");
      // Every object in full: the running proxy holds only what its handlers retain.
      assertEquals(prefetched.held, 0, "the first lists are let go once the informers took them");
    }, prefetched);
  } finally {
    await api.stop();
  }
});

Deno.test("kube-proxy's label selector: the file source and the API source program the same objects", async () => {
  const services = [
    makeService("ns1", "mine"),
    makeService("ns1", "other", (s) => {
      s.metadata!.labels = { "service.kubernetes.io/service-proxy-name": "other" };
      s.spec!.clusterIPs = ["172.30.0.61"];
    }),
    makeService("ns1", "hl", (s) => {
      s.metadata!.labels = { "service.kubernetes.io/headless": "" };
      s.spec!.clusterIPs = ["172.30.0.62"];
    }),
  ];
  const slices = [
    makeEndpointSlice("ns1", "mine", (s) => s.endpoints = [ep("10.180.0.1")]),
    makeEndpointSlice("ns1", "mine", (s) => {
      s.metadata!.name = "mine-headless";
      s.metadata!.labels!["service.kubernetes.io/headless"] = "";
      s.endpoints = [ep("10.180.0.9")];
    }),
  ];
  const want = { "ns1/mine:p80/TCP": ["10.180.0.1:80"] };

  const api = new TestApiServer();
  api.start();
  for (const s of services) api.apply("services", s);
  for (const s of slices) api.apply("endpointslices", s);
  try {
    await withSource(api, async (p) => {
      await eventually(() => assertEquals(state(p), want));
    });
  } finally {
    await api.stop();
  }

  const dir = await Deno.makeTempDir();
  try {
    const docs = [
      ...services.map((s) => ({ apiVersion: "v1", kind: "Service", ...s })),
      ...slices.map((s) => ({ apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s })),
    ];
    await Deno.writeTextFile(`${dir}/all.json`, JSON.stringify({ kind: "List", items: docs }));
    const opts = baseOptions({ clock: realClock, minSyncPeriodMs: 0 });
    const p = new RecordingProxier(opts);
    await new FileSource({ path: dir, nodeName: NODE, handler: p, log: opts.log }).load();
    await p.syncNow();
    assertEquals(state(p), want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("informers: an API server that cannot be reached is logged with the reason (refused, certificate)", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const closedPort = (closed.addr as Deno.NetAddr).port;
  closed.close();
  const ac = new AbortController();
  const tls = await serveTls(() => Response.json({ kind: "List", items: [] }), ac.signal);
  try {
    for (
      const [url, reason] of [
        [`http://127.0.0.1:${closedPort}`, /Connection refused/],
        // No CA given: the server's certificate is not trusted, and the log says so.
        [`https://127.0.0.1:${tls.addr.port}`, /certificate/i],
      ] as const
    ) {
      const opts = baseOptions({ clock: realClock, minSyncPeriodMs: 0 });
      const stop = new AbortController();
      const run = new KubernetesSource({
        access: await apiAccessTo(url),
        nodeName: NODE,
        handler: new RecordingProxier(opts),
        log: opts.log,
        clock: realClock,
      }).run(stop.signal);
      try {
        await eventually(() => {
          // The four kinds fail together: one short line a retry says so, with the reason and the
          // next delay.
          const said = opts.log.records.filter((r) => r.level === "warn" && r.msg.startsWith("Watch failed"));
          assert(said.length > 0, "a failure is logged");
          const delays = said.map((r) => r.fields?.retryInMs);
          assertEquals(delays, [...new Set(delays)], JSON.stringify(said));
          const error = String(said[0].fields?.error);
          assert(reason.test(error) && error.length <= 120, error);
          // The whole error of each kind, at -v=2.
          const whole = opts.log.records.filter((r) => r.level === "debug" && r.msg === "Watch failed");
          assertEquals(new Set(whole.map((r) => r.fields?.kind)).size, 4);
          assert(String(whole[0].fields?.error).startsWith("fetch failed: "), String(whole[0].fields?.error));
        }, CONVERGE_MS);
      } finally {
        stop.abort();
        await run;
      }
    }
  } finally {
    ac.abort();
    await tls.finished;
  }
});
