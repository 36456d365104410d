import type { V1EndpointSlice } from "@kubernetes/client-node";
import { assert, assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { apiAccessTo, TestApiServer } from "../../tests/support/api_server.ts";
import { serveTls } from "../../tests/support/net_helpers.ts";
import { ep, makeEndpointSlice, NODE } from "../../tests/support/fixtures.ts";
import { sliceEndpoints } from "../model/endpoint.ts";
import { describeError, shortError, WatchError } from "../runtime/errors.ts";
import type { ApiAccess } from "./api_access.ts";
import { ApiClient, sourceQueries } from "./api_client.ts";
import { listSlicesOnWorker } from "./list_on_worker.ts";

const { path, query } = sourceQueries(NODE).EndpointSlice;

/** Lists through `api` on a worker; returns the slices the sink got and the list. */
async function listOn(api: ApiClient) {
  const got: V1EndpointSlice[] = [];
  const list = await api.listThrough(
    path,
    query,
    (req, signal) => listSlicesOnWorker(req, NODE, (b) => got.push(...b), signal),
  );
  return { got, list };
}

Deno.test("a list on a worker: every slice the server holds reaches the sink with the reading the slice itself gives, and the request is counted", async () => {
  const server = new TestApiServer();
  const slices = [
    makeEndpointSlice("ns1", "web", (s) => s.endpoints = [ep("10.0.0.1", { node: NODE }), ep("10.0.0.2")]),
    makeEndpointSlice("ns1", "v6", (s) => {
      s.addressType = "IPv6";
      s.endpoints = [ep("fd00::1")];
    }),
    makeEndpointSlice("ns2", "broken", (s) => s.endpoints = [ep("10.0.0.3"), { addresses: ["nope"] }]),
  ];
  for (const s of slices) server.apply("endpointslices", structuredClone(s));
  const url = server.start();
  try {
    const seen: string[] = [];
    const api = new ApiClient(await apiAccessTo(url), { observe: (r) => seen.push(`${r.method} ${r.code}`) });
    const { got, list } = await listOn(api);
    assertEquals(got.map((s) => s.metadata?.name).sort(), slices.map((s) => s.metadata?.name).sort());
    for (const s of slices) {
      const mine = got.find((g) => g.metadata?.name === s.metadata?.name)!;
      for (const family of ["IPv4", "IPv6"] as const) {
        assertEquals(
          sliceEndpoints(mine, family, NODE),
          sliceEndpoints(s, family, NODE),
          `${s.metadata?.name} ${family}`,
        );
      }
    }
    assert(
      typeof list.metadata?.resourceVersion === "string" && list.metadata.resourceVersion !== "",
      "the list's version",
    );
    assertEquals(list.items, [], "the items went to the sink");
    assertEquals(seen, ["GET 200"]);
  } finally {
    await server.stop();
  }
});

Deno.test("a list on a worker that the server refuses rejects with the HTTP status, counted as such", async () => {
  const server = new TestApiServer();
  server.failLists = 1;
  const url = server.start();
  try {
    const seen: string[] = [];
    const api = new ApiClient(await apiAccessTo(url), { observe: (r) => seen.push(r.code) });
    const e = await assertRejects(() => listOn(api), WatchError);
    assertEquals(e.statusCode, 500);
    assertEquals(seen, ["500"]);
  } finally {
    await server.stop();
  }
});

Deno.test("a list on a worker whose body does not parse rejects with a SyntaxError; one never answered gives up at the list's deadline", async () => {
  const ac = new AbortController();
  const served = Deno.serve(
    { port: 0, hostname: "127.0.0.1", signal: ac.signal, onListen: () => {} },
    () => new Response(`{"kind":"EndpointSliceList","items":[{"metadata":{"name":"a"}},{"meta`),
  );
  const server = new TestApiServer();
  server.hangListOf = "endpointslices";
  const url = server.start();
  try {
    const broken = new ApiClient(await apiAccessTo(`http://127.0.0.1:${served.addr.port}`));
    const e = await assertRejects(() => listOn(broken), SyntaxError);
    assert(e.message.includes("ended inside its items"), e.message);
    const hung = new ApiClient(await apiAccessTo(url), { listTimeoutMs: 300 });
    const late = await assertRejects(() => listOn(hung), WatchError);
    assert(late.message.includes("no answer within 0.3 s"), late.message);
  } finally {
    ac.abort();
    await served.finished;
    await server.stop();
  }
});

Deno.test("a list on a worker reaches an HTTPS API server through the client's CA, with its token; without the CA nothing is sent", async () => {
  const ac = new AbortController();
  const seen: string[] = [];
  const slice = makeEndpointSlice("ns1", "web", (s) => s.endpoints = [ep("10.0.0.1", { node: NODE })]);
  const server = await serveTls((req) => {
    seen.push(`${new URL(req.url).pathname} ${req.headers.get("authorization")}`);
    return Response.json({ kind: "EndpointSliceList", metadata: { resourceVersion: "7" }, items: [slice] });
  }, ac.signal);
  try {
    const url = `https://127.0.0.1:${server.addr.port}`;
    const ca = await Deno.readTextFile(new URL("../../tests/testdata/tls/ca.crt", import.meta.url));
    const access = (caCerts?: string[]): ApiAccess => ({
      server: url,
      origin: "test",
      headers: () =>
        Promise.resolve(new Headers({ accept: "application/json", authorization: "Bearer t0k" })),
      tls: caCerts === undefined ? {} : { caCerts },
    });
    const { got, list } = await listOn(new ApiClient(access([ca])));
    assertEquals(list.metadata?.resourceVersion, "7");
    assertEquals(sliceEndpoints(got[0], "IPv4", NODE), sliceEndpoints(slice, "IPv4", NODE));
    assertEquals(seen, [`${path} Bearer t0k`]);
    const e = await assertRejects(() => listOn(new ApiClient(access())), TypeError);
    assert(/certificate/i.test(shortError(e)), describeError(e));
    assertEquals(seen.length, 1, "nothing sent to a server the worker does not trust");
  } finally {
    ac.abort();
    await server.finished;
  }
});
