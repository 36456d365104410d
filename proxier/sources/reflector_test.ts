import type { KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
import { assertEquals } from "../../tests/support/assert.ts";
import { collectNow } from "../../tests/support/collect.ts";
import { FakeClock } from "../runtime/clock.ts";
import { RECONNECT_START_MS, Reflector, type Watcher } from "./reflector.ts";

const obj = (name: string, rv: string, note = ""): KubernetesObject => ({
  metadata: { namespace: "ns", name, resourceVersion: rv, annotations: { note } },
});

/** A watcher whose watches the test drives: each call is recorded with its resourceVersion. */
class FakeWatcher implements Watcher {
  readonly calls: Array<{
    rv: unknown;
    event: (phase: string, o: unknown) => void;
    done: (e: unknown) => void;
    aborted: () => boolean;
  }> = [];
  watch(
    _path: string,
    query: Record<string, unknown>,
    callback: (phase: string, object: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const ac = new AbortController();
    this.calls.push({ rv: query.resourceVersion, event: callback, done, aborted: () => ac.signal.aborted });
    return Promise.resolve(ac);
  }
}

function setup(
  lists: Array<KubernetesObject[] | Error>,
  retain?: (o: KubernetesObject) => KubernetesObject,
) {
  const clock = new FakeClock();
  const watcher = new FakeWatcher();
  const seen: string[] = [];
  let listed = 0;
  const reflector = new Reflector<KubernetesObject>({
    path: "/api/v1/services",
    query: { labelSelector: "x" },
    list: () => {
      const next = lists.shift() ?? [];
      if (next instanceof Error) return Promise.reject(next);
      listed++;
      return Promise.resolve(
        { items: next, metadata: { resourceVersion: `list-${listed}` } } as KubernetesListObject<
          KubernetesObject
        >,
      );
    },
    watcher,
    clock,
    retain,
    handlers: {
      add: (o) => seen.push(`add ${o.metadata!.name}`),
      update: (old, o) =>
        seen.push(
          `update ${o.metadata!.name} ${old.metadata!.annotations!.note}->${o.metadata!.annotations!.note}`,
        ),
      delete: (o) => seen.push(`delete ${o.metadata!.name} ${o.metadata!.annotations!.note}`),
      listed: () => seen.push("listed"),
      error: (e) => seen.push(`error ${(e as Error).message}`),
    },
  });
  return { clock, watcher, seen, reflector };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

Deno.test("reflector: lists, then watches from the list's version; events update the one copy it holds", async () => {
  const { watcher, seen, reflector } = setup([[obj("a", "1", "v1"), obj("b", "2", "v1")]]);
  await reflector.start();
  assertEquals(seen, ["add a", "add b", "listed"]);
  assertEquals(watcher.calls.map((c) => c.rv), ["list-1"]);
  const w = watcher.calls[0];
  w.event("MODIFIED", obj("a", "3", "v2"));
  w.event("ADDED", obj("c", "4", "v1"));
  w.event("DELETED", obj("b", "5", "final"));
  w.event("BOOKMARK", { metadata: { resourceVersion: "6" } });
  // The deleted object is reported as the event gave it (its last state), as client-go's informers.
  assertEquals(seen.slice(3), ["update a v1->v2", "add c", "delete b final"]);
  assertEquals(reflector.size, 2);
  reflector.stop();
  assertEquals(w.aborted(), true);
});

Deno.test("reflector: 410 Gone relists, deleting what the new list lacks; a clean end resumes from the last version after a pause", async () => {
  const { clock, watcher, seen, reflector } = setup([
    [obj("a", "1", "v1"), obj("b", "2", "v1")],
    [obj("a", "9", "v3")],
    [obj("a", "9", "v3")],
  ]);
  await reflector.start();
  watcher.calls[0].event("MODIFIED", obj("a", "7", "v2"));
  // A clean end: the first reconnect is at once, from resourceVersion 7.
  watcher.calls[0].done(null);
  await settle();
  assertEquals(watcher.calls.map((c) => c.rv), ["list-1", "7"]);
  // A second clean end without events in between waits RECONNECT_START_MS.
  watcher.calls[1].done(null);
  await settle();
  assertEquals(watcher.calls.length, 2);
  await clock.advance(RECONNECT_START_MS);
  await settle();
  assertEquals(watcher.calls.map((c) => c.rv), ["list-1", "7", "7"]);
  // Compaction: an ERROR event with a 410 Status, then the stream ends.
  watcher.calls[2].event("ERROR", { kind: "Status", code: 410 });
  watcher.calls[2].done(null);
  await settle();
  await clock.advance(2 * RECONNECT_START_MS);
  await settle();
  assertEquals(watcher.calls.at(-1)!.rv, "list-2");
  // As client-go's Replace: what the list holds first, then what it no longer holds.
  assertEquals(seen.slice(3), ["update a v1->v2", "update a v2->v3", "delete b v1", "listed"]);
  // A 410 on the watch request itself relists too, and an inactive watch reconnects at once.
  watcher.calls.at(-1)!.done(Object.assign(new Error("gone"), { statusCode: 410 }));
  await settle();
  // No event since the last pause: this reconnect waits twice as long (4 s).
  await clock.advance(4 * RECONNECT_START_MS);
  await settle();
  assertEquals(watcher.calls.at(-1)!.rv, "list-3");
  watcher.calls.at(-1)!.done(new DOMException("watch inactive", "TimeoutError"));
  await settle();
  assertEquals(watcher.calls.at(-1)!.rv, "list-3");
  reflector.stop();
});

Deno.test("reflector: another failure is reported and stops it, keeping the objects; start resumes", async () => {
  const { watcher, seen, reflector } = setup([[obj("a", "1", "v1")], new Error("HTTP 500"), [
    obj("a", "3", "v2"),
  ]]);
  await reflector.start();
  watcher.calls[0].done(Object.assign(new Error("HTTP 403"), { statusCode: 403 }));
  await settle();
  assertEquals(seen.slice(2), ["error HTTP 403"]);
  assertEquals([watcher.calls.length, reflector.size], [1, 1]);
  // Resuming keeps the version: no list, a watch from where it stopped.
  await reflector.start();
  assertEquals(watcher.calls.map((c) => c.rv), ["list-1", "list-1"]);
  // A list that fails is reported the same way.
  watcher.calls[1].done(Object.assign(new Error("gone"), { statusCode: 410 }));
  await settle();
  assertEquals(seen.slice(3), ["error HTTP 500"]);
  await reflector.start();
  assertEquals(seen.slice(4), ["update a v1->v2", "listed"]);
  reflector.stop();
});

Deno.test("reflector: with retain it keeps only that of each object: the old object of updates and of relist deletes", async () => {
  // What the source retains of EndpointSlices: a stub naming the object, not its contents.
  const stub = (o: KubernetesObject): KubernetesObject => ({
    metadata: { ...o.metadata, annotations: { note: `stub of ${o.metadata!.annotations!.note}` } },
  });
  const { watcher, seen, reflector } = setup([[obj("a", "1", "v1"), obj("b", "2", "v1")], [
    obj("b", "8", "v3"),
  ]], stub);
  await reflector.start();
  const w = watcher.calls[0];
  w.event("MODIFIED", obj("a", "3", "v2"));
  w.event("MODIFIED", obj("b", "4", "v2"));
  // Handlers always get the new object whole; the old one as retained.
  assertEquals(seen.slice(3), ["update a stub of v1->v2", "update b stub of v1->v2"]);
  // A relist that no longer holds "a" deletes what was retained of it.
  w.event("ERROR", { kind: "Status", code: 410 });
  w.done(null);
  await settle();
  assertEquals(seen.slice(5), ["update b stub of v2->v3", "delete a stub of v2", "listed"]);
  reflector.stop();
});

Deno.test("reflector: holds no list once it handed the objects over, while its watch still connects", async () => {
  // A first list is every object in full (tens of MiB at scale); only what `retain` keeps may stay.
  let list: WeakRef<object> | undefined;
  let connect = (_ac: AbortController) => {};
  const seen: string[] = [];
  const reflector = new Reflector<KubernetesObject>({
    path: "/api/v1/services",
    query: {},
    list: () => {
      const l = { items: [obj("a", "1", "v1")], metadata: { resourceVersion: "1" } };
      list = new WeakRef(l);
      return Promise.resolve(l as KubernetesListObject<KubernetesObject>);
    },
    watcher: { watch: () => new Promise<AbortController>((resolve) => connect = resolve) },
    clock: new FakeClock(),
    retain: (o) => ({ metadata: { name: o.metadata!.name } }),
    handlers: {
      add: (o) => seen.push(`add ${o.metadata!.name}`),
      update: () => {},
      delete: () => {},
      listed: () => seen.push("listed"),
      error: (e) => seen.push(`error ${e}`),
    },
  });
  const started = reflector.start();
  await settle();
  assertEquals(seen, ["add a", "listed"]);
  collectNow();
  assertEquals(list?.deref(), undefined, "the list outlived its hand-over");
  connect(new AbortController());
  await started;
  reflector.stop();
});

Deno.test("reflector: a list's items are handed over batch by batch as they are parsed; a list failing midway keeps what came, and the next one deletes what it lacks", async () => {
  const clock = new FakeClock();
  const watcher = new FakeWatcher();
  const seen: string[] = [];
  // Each list is driven by the test: its sink, and how it ends.
  const lists: Array<{
    sink: (items: readonly KubernetesObject[]) => void;
    end: (e?: Error) => void;
  }> = [];
  const reflector = new Reflector<KubernetesObject>({
    path: "/api/v1/services",
    query: {},
    list: (sink) =>
      new Promise((resolve, reject) => {
        lists.push({
          sink,
          end: (e) =>
            e === undefined ? resolve({ items: [], metadata: { resourceVersion: "9" } }) : reject(e),
        });
      }),
    watcher,
    clock,
    handlers: {
      add: (o) => seen.push(`add ${o.metadata!.name}`),
      update: (_old, o) => seen.push(`update ${o.metadata!.name}`),
      delete: (o) => seen.push(`delete ${o.metadata!.name}`),
      listed: () => seen.push("listed"),
      error: (e) => seen.push(`error ${(e as Error).message}`),
    },
  });
  const started = reflector.start();
  await settle();
  lists[0].sink([obj("a", "1"), obj("b", "1")]);
  assertEquals(seen, ["add a", "add b"], "the first batch is handed over while the list is on its way");
  assertEquals(reflector.size, 2);
  lists[0].sink([obj("c", "1")]);
  lists[0].end(new Error("connection reset"));
  await started;
  assertEquals(seen.slice(2), ["add c", "error connection reset"]);
  assertEquals(watcher.calls.length, 0, "no watch without a whole list");
  // The next list lacks b: it goes once the list is all in, before the list is said complete.
  const again = reflector.start();
  await settle();
  lists[1].sink([obj("a", "2"), obj("c", "2")]);
  assertEquals(seen.slice(4), ["update a", "update c"]);
  lists[1].end();
  await again;
  assertEquals(seen.slice(6), ["delete b", "listed"]);
  assertEquals(reflector.size, 2);
  assertEquals(watcher.calls.map((c) => c.rv), ["9"]);
  reflector.stop();
});
