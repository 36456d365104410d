import type { V1EndpointSlice, V1Node, V1Service } from "@kubernetes/client-node";
import { assert, assertEquals, assertNotEquals } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { eventually } from "../../tests/support/net_helpers.ts";
import { FileSource } from "./file.ts";
import { MAX_SETTLE_MS, Settle, WriteTracker } from "./file_watch.ts";
import type { SourceKept } from "./file_kept.ts";
import { FakeClock } from "../runtime/clock.ts";
import type { EventHandler } from "./handlers.ts";

/** Records events as `verb kind key` lines and checks update pairs. */
class Recorder implements EventHandler {
  events: string[] = [];
  #k = (o: { metadata?: { namespace?: string; name?: string } }) =>
    `${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;
  onServiceAdd(s: V1Service) {
    this.events.push(`add Service ${this.#k(s)}`);
  }
  onServiceUpdate(o: V1Service, s: V1Service) {
    this.events.push(`update Service ${this.#k(s)} ${o.spec?.clusterIP}->${s.spec?.clusterIP}`);
  }
  onServiceDelete(s: V1Service) {
    this.events.push(`delete Service ${this.#k(s)}`);
  }
  onServicesSynced() {
    this.events.push("synced Service");
  }
  onEndpointSliceAdd(s: V1EndpointSlice) {
    this.events.push(`add EndpointSlice ${this.#k(s)}`);
  }
  onEndpointSliceUpdate(_o: V1EndpointSlice, s: V1EndpointSlice) {
    this.events.push(`update EndpointSlice ${this.#k(s)}`);
  }
  onEndpointSliceDelete(s: V1EndpointSlice) {
    this.events.push(`delete EndpointSlice ${this.#k(s)}`);
  }
  onEndpointSlicesSynced() {
    this.events.push("synced EndpointSlice");
  }
  onNodeAdd(n: V1Node) {
    this.events.push(`add Node ${n.metadata?.name}`);
  }
  onNodeUpdate() {}
  onNodeDelete() {}
  onNodeSynced() {
    this.events.push("synced Node");
  }
  onServiceCIDRsChanged(cidrs: readonly string[]) {
    this.events.push(`service CIDRs ${cidrs.join(",")}`);
  }
}

const svc = (name: string, ip: string) =>
  `apiVersion: v1\nkind: Service\nmetadata: {namespace: ns1, name: ${name} }\nspec: {clusterIP: ${ip}, ports: [{port: 80}]}\n`;

Deno.test("FileSource: reads a directory, then turns file edits into add/update/delete events", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("a", "172.30.0.1") + "---\n" + svc("b", "172.30.0.2"));
    await Deno.writeTextFile(
      `${dir}/nodes.json`,
      JSON.stringify({
        kind: "List",
        items: [{ kind: "Node", metadata: { name: "node-a" } }, {
          kind: "Node",
          metadata: { name: "node-b" },
        }],
      }),
    );
    await Deno.writeTextFile(`${dir}/notes.txt`, "not a manifest");
    const rec = new Recorder();
    const log = new MemoryLogger();
    let broken = 0;
    const src = new FileSource({
      path: dir,
      nodeName: "node-a",
      handler: rec,
      log,
      onBroken: () => broken++,
    });
    await src.load();
    assertEquals(rec.events, [
      "add Service ns1/a",
      "add Service ns1/b",
      "add Node node-a",
      "synced Service",
      "synced EndpointSlice",
      "synced Node",
    ]);
    const watching = src.watch(ac.signal);
    rec.events = [];
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("a", "172.30.0.9"));
    await eventually(() =>
      assertEquals(rec.events, ["update Service ns1/a 172.30.0.1->172.30.0.9", "delete Service ns1/b"])
    );
    // A file that does not parse: reported by path and line; its previous objects stay.
    rec.events = [];
    await Deno.writeTextFile(`${dir}/a.yaml`, "kind: Service\nmetadata: [\n  name: broken\n");
    await eventually(() =>
      assertEquals(log.messages("error"), ["Source file does not parse; keeping its previous objects"])
    );
    const err = log.records.find((r) => r.level === "error")!;
    assertEquals([err.fields?.path, typeof err.fields?.line], [`${dir}/a.yaml`, "number"]);
    assertEquals([rec.events, broken], [[], 1]);
    // Another edit that still does not parse (the same error): said and counted again, once.
    await Deno.writeTextFile(`${dir}/a.yaml`, "kind: Service\nmetadata: [\n  name: broken2\n");
    await eventually(() => assertEquals(broken, 2));
    assertEquals(log.messages("error").length, 2);
    await Deno.remove(`${dir}/a.yaml`);
    await eventually(() => assertEquals(rec.events, ["delete Service ns1/a"]));
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

const slice = (name: string, ip: string, annotations = "") =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {namespace: ns1, name: ${name}, ` +
  `labels: {kubernetes.io/service-name: ${name}}${annotations}}\naddressType: IPv4\n` +
  `endpoints: [{addresses: [${ip}]}]\nports: [{port: 80}]\n`;

/** Records EndpointSlices as delivered (with their annotations). */
class SliceRecorder extends Recorder {
  slices: V1EndpointSlice[] = [];
  override onEndpointSliceAdd(s: V1EndpointSlice) {
    super.onEndpointSliceAdd(s);
    this.slices.push(s);
  }
  override onEndpointSliceUpdate(o: V1EndpointSlice, s: V1EndpointSlice) {
    super.onEndpointSliceUpdate(o, s);
    this.slices.push(s);
  }
}

const TRIGGER = "endpoints.kubernetes.io/last-change-trigger-time";

Deno.test("FileSource: a broken file is reported once, edits elsewhere do not repeat it, and its repair is said", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    for (let i = 0; i < 50; i++) {
      await Deno.writeTextFile(`${dir}/svc-${i}.yaml`, svc(`s${i}`, `172.30.1.${i}`));
    }
    await Deno.writeTextFile(`${dir}/broken.yaml`, "kind: Service\nmetadata: [\n");
    const rec = new Recorder();
    const log = new MemoryLogger();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log });
    await src.load();
    const watching = src.watch(ac.signal);
    rec.events = [];
    await Deno.writeTextFile(`${dir}/svc-7.yaml`, svc("s7", "172.30.2.7"));
    await eventually(() => assertEquals(rec.events, ["update Service ns1/s7 172.30.1.7->172.30.2.7"]));
    // Rewritten with the same error: still nothing new to say.
    await Deno.writeTextFile(`${dir}/broken.yaml`, "kind: Service\nmetadata: [\n");
    await new Promise((r) => setTimeout(r, 300));
    assertEquals(log.messages("error").length, 1, log.messages("error").join("\n"));
    const err = log.records.find((r) => r.level === "error")!;
    assertEquals([err.msg, err.fields?.path, err.fields?.line], [
      "Source file does not parse; keeping its previous objects",
      `${dir}/broken.yaml`,
      3,
    ]);
    await Deno.writeTextFile(`${dir}/broken.yaml`, svc("fixed", "172.30.3.1"));
    await eventually(() => assertEquals(rec.events.at(-1), "add Service ns1/fixed"));
    assertEquals(log.messages("info").filter((m) => m.startsWith("Source file parses again")).length, 1);
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileSource: documents of other kinds are named once per file; kube-proxy's label selector applies", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const other = svc("other", "172.30.0.5").replace(
      "metadata: {",
      "metadata: {labels: {service.kubernetes.io/service-proxy-name: other}, ",
    );
    const headless = svc("hl", "172.30.0.6").replace(
      "metadata: {",
      'metadata: {labels: {service.kubernetes.io/headless: ""}, ',
    );
    await Deno.writeTextFile(
      `${dir}/a.yaml`,
      `${
        svc("mine", "172.30.0.4")
      }\n---\n${other}\n---\n${headless}\n---\nkind: ConfigMap\nmetadata: { name: cm }\n---\nkind: Secret\n`,
    );
    const rec = new Recorder();
    const log = new MemoryLogger();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log });
    await src.load();
    assertEquals(rec.events.filter((e) => e.startsWith("add")), ["add Service ns1/mine"]);
    assertEquals(log.records.filter((r) => r.level === "warn"), [{
      level: "warn",
      msg: "Ignoring documents that are not Services, EndpointSlices, Nodes or ServiceCIDRs",
      fields: { path: `${dir}/a.yaml`, kinds: "ConfigMap, Secret" },
    }]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileSource: of two files defining one object the later wins; removing it brings back the other", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("x", "172.30.0.1"));
    await Deno.writeTextFile(`${dir}/b.yaml`, svc("x", "172.30.0.2"));
    const rec = new Recorder();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log: new MemoryLogger() });
    await src.load();
    assertEquals(rec.events.slice(0, 1), ["add Service ns1/x"]);
    const watching = src.watch(ac.signal);
    rec.events = [];
    await Deno.remove(`${dir}/b.yaml`);
    await eventually(() => assertEquals(rec.events, ["update Service ns1/x 172.30.0.2->172.30.0.1"]));
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("y", "172.30.0.3"));
    await eventually(() =>
      assertEquals(rec.events, [
        "update Service ns1/x 172.30.0.2->172.30.0.1",
        "delete Service ns1/x",
        "add Service ns1/y",
      ])
    );
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileSource: a redefinition in another file is said once per version, naming both files", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("web", "172.30.0.1"));
    await Deno.writeTextFile(
      `${dir}/b.yaml`,
      svc("web", "172.30.0.2") + "---\n" + svc("other", "172.30.0.9"),
    );
    const log = new MemoryLogger();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: new Recorder(), log });
    await src.load();
    const conflicts = () => log.records.filter((r) => r.msg.startsWith("More than one source file"));
    assertEquals(conflicts().map((r) => r.fields), [{
      object: 'Service "ns1/web"',
      files: `${dir}/a.yaml, ${dir}/b.yaml`,
      used: `${dir}/b.yaml`,
    }]);
    const watching = src.watch(ac.signal);
    // Re-reading the same definitions says nothing new; a new version of one of them does.
    await Deno.writeTextFile(
      `${dir}/b.yaml`,
      svc("web", "172.30.0.2") + "---\n" + svc("other", "172.30.0.8"),
    );
    await new Promise((r) => setTimeout(r, 900));
    assertEquals(conflicts().length, 1);
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("web", "172.30.0.3"));
    await eventually(() => assertEquals(conflicts().length, 2));
    // Resolved, then redefined: said again.
    await Deno.remove(`${dir}/a.yaml`);
    await new Promise((r) => setTimeout(r, 300));
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("web", "172.30.0.3"));
    await eventually(() => assertEquals(conflicts().length, 3));
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileSource: an object twice in one file and fields its kind lacks are named with their lines, once", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const typos = `# the web service
apiVersion: v1
kind: Service
metadata: {namespace: ns1, name: web}
spec:
  clusterIP: 172.30.0.1
  sessionAfinity: ClientIP
  ports: [{port: 80, targetport: 8080}]
---
${svc("twice", "172.30.0.5")}---
${svc("twice", "172.30.0.6")}`;
    await Deno.writeTextFile(`${dir}/a.yaml`, typos);
    const log = new MemoryLogger();
    const rec = new Recorder();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log });
    await src.load();
    // The objects are still used (the later of the two), as the API server would prune the fields.
    assertEquals(rec.events.filter((e) => e.startsWith("add")), [
      "add Service ns1/web",
      "add Service ns1/twice",
    ]);
    assertEquals(log.records.filter((r) => r.level === "warn").map((r) => [r.msg, r.fields]), [
      ["Ignoring fields a source object's kind does not have (kubectl apply would refuse them)", {
        path: `${dir}/a.yaml`,
        line: 2,
        object: 'Service "ns1/web"',
        fields: "spec.sessionAfinity, spec.ports[0].targetport",
      }],
      ["Source file defines an object twice; the later one is used", {
        path: `${dir}/a.yaml`,
        object: 'Service "ns1/twice"',
        lines: "10, 15",
      }],
    ]);
    // A second read of the same file (a resync) repeats nothing.
    const again = new FileSource({ path: dir, nodeName: "node-a", handler: new Recorder(), log });
    await again.load();
    assertEquals(
      log.records.filter((r) => r.level === "warn").length,
      4,
      "a new source instance says it anew",
    );
    await src.load();
    assertEquals(log.records.filter((r) => r.level === "warn").length, 4);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileSource: an edited EndpointSlice carries the file's modification time as its trigger time", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    await Deno.writeTextFile(`${dir}/s.yaml`, slice("a", "10.0.0.1"));
    await Deno.writeTextFile(
      `${dir}/t.yaml`,
      slice("b", "10.0.0.2", `, annotations: {${TRIGGER}: "2020-01-01T00:00:00Z"}`),
    );
    const rec = new SliceRecorder();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log: new MemoryLogger() });
    await src.load();
    assertEquals(rec.slices.map((s) => s.metadata?.annotations?.[TRIGGER]), [
      undefined,
      "2020-01-01T00:00:00Z",
    ]);
    const watching = src.watch(ac.signal);
    rec.slices = [];
    await Deno.writeTextFile(`${dir}/s.yaml`, slice("a", "10.0.0.3"));
    const mtime = (await Deno.stat(`${dir}/s.yaml`)).mtime!.toISOString();
    await Deno.writeTextFile(
      `${dir}/t.yaml`,
      slice("b", "10.0.0.4", `, annotations: {${TRIGGER}: "2021-01-01T00:00:00Z"}`),
    );
    await eventually(() => assertEquals(rec.slices.length, 2));
    const byName = new Map(rec.slices.map((s) => [s.metadata?.name, s.metadata?.annotations?.[TRIGGER]]));
    assertEquals(byName.get("a"), mtime);
    assertEquals(byName.get("b"), "2021-01-01T00:00:00Z", "an explicit trigger time is kept");
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Settle: a never-quiet burst is read 1 s after its first event; a burst 100 ms after its last", async () => {
  const clock = new FakeClock();
  const fired: number[] = [];
  const settle = new Settle(clock, () => fired.push(clock.now()));
  const start = clock.now();
  // A directory that never goes quiet: an event every 30 ms for 3 s.
  for (let t = 0; t < 3000; t += 30) {
    settle.event();
    await clock.advance(30);
  }
  assertEquals(fired.map((t) => t - start), [MAX_SETTLE_MS, 2 * MAX_SETTLE_MS + 20]);
  settle.stop();
  fired.length = 0;
  const burst = clock.now();
  for (let i = 0; i < 3; i++) {
    settle.event();
    await clock.advance(50);
  }
  await clock.advance(1000);
  assertEquals(fired.map((t) => t - burst), [200]);
});

Deno.test("WriteTracker: a path written and not closed is never taken; closed, renamed or removed, it is", () => {
  const t = new WriteTracker();
  t.event("create", "a");
  t.event("modify", "a");
  t.event("modify", "b");
  assertEquals(t.takeClosed(), [], "both held open by their writers");
  assert(t.waiting);
  t.event("access", "b"); // closed after writing
  assertEquals(t.takeClosed(), ["b"]);
  t.event("modify", "a");
  assertEquals(t.takeClosed(), [], "a writer that pauses for any time still holds it");
  t.event("rename", "a"); // a new file renamed over it: whole
  const before = t.count("a");
  assertEquals(t.takeClosed(), ["a"]);
  t.event("modify", "a");
  assert(t.count("a") !== before && t.isOpen("a"), "a read taken before this write was overtaken");
  t.event("remove", "a");
  assertEquals(t.takeClosed(), ["a"]);
  assertEquals(t.waiting, false);
});

Deno.test("FileSource: a file rewritten without pause is still read (a writer that never pauses is not starved)", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("a", "172.30.0.1"));
    const rec = new Recorder();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log: new MemoryLogger() });
    await src.load();
    const watching = src.watch(ac.signal);
    await new Promise((r) => setTimeout(r, 100));
    rec.events = [];
    // A writer that never pauses for the 100 ms settle time.
    let i = 2;
    const writer = setInterval(
      () => Deno.writeTextFileSync(`${dir}/a.yaml`, svc("a", `172.30.0.${i++}`)),
      30,
    );
    try {
      // Real time on a machine that may be busy: the bound is Settle's (tested on a fake clock
      // above); here, that an unpaused writer's file is read at all.
      await eventually(
        () => assert(rec.events.some((e) => e.startsWith("update Service ns1/a")), "an update"),
        10_000,
      );
    } finally {
      clearInterval(writer);
    }
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileSource: a file written in place with a pause mid-write is applied only once complete", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    await Deno.writeTextFile(`${dir}/a.yaml`, svc("a", "172.30.0.1") + "---\n" + svc("b", "172.30.0.2"));
    const rec = new Recorder();
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log: new MemoryLogger() });
    await src.load();
    const watching = src.watch(ac.signal);
    await new Promise((r) => setTimeout(r, 200));
    rec.events = [];
    // In place: the first document, a 300 ms pause (the file then holds only "a"), then the second.
    const f = await Deno.open(`${dir}/a.yaml`, { write: true, truncate: true });
    const enc = new TextEncoder();
    await f.write(enc.encode(svc("a", "172.30.0.1")));
    await new Promise((r) => setTimeout(r, 300));
    await f.write(enc.encode("---\n" + svc("b", "172.30.0.22")));
    f.close();
    await eventually(() => assertNotEquals(rec.events, []), 5000);
    await new Promise((r) => setTimeout(r, 300));
    // Never "delete Service ns1/b": the half-written file was not applied.
    assertEquals(rec.events, ["update Service ns1/b 172.30.0.2->172.30.0.22"]);
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("file source: a watch whose signal aborted before it began (SIGTERM during the start) ends at once", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kpd-file-aborted-" });
  try {
    await Deno.writeTextFile(`${dir}/a.yaml`, "");
    const src = new FileSource({
      path: dir,
      nodeName: "node-a",
      handler: new Recorder(),
      log: new MemoryLogger(),
    });
    await src.load();
    const ac = new AbortController();
    ac.abort();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ended = await Promise.race([
      src.watch(ac.signal).then(() => "ended"),
      new Promise((r) => timer = setTimeout(() => r("still watching"), 2000)),
    ]);
    clearTimeout(timer);
    assertEquals(ended, "ended");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const node = (name: string) => `apiVersion: v1\nkind: Node\nmetadata: {name: ${name}}\n`;

/** A file source of `files` (name -> text) in a new directory, loaded and watched: `path` names the file or the directory. */
async function watched(files: Record<string, string>, single?: string) {
  const dir = await Deno.makeTempDir({ prefix: "kpd-file-kept-" });
  for (const [f, text] of Object.entries(files)) await Deno.writeTextFile(`${dir}/${f}`, text);
  const rec = new Recorder();
  const log = new MemoryLogger();
  const kept: Array<SourceKept | undefined> = [];
  let refused = 0;
  const path = single === undefined ? dir : `${dir}/${single}`;
  const src = new FileSource({
    path,
    nodeName: "node-a",
    handler: rec,
    log,
    onKept: (k) => kept.push(k),
    onBroken: () => refused++,
  });
  await src.load();
  const ac = new AbortController();
  const watching = src.watch(ac.signal);
  await new Promise((r) => setTimeout(r, 200));
  rec.events = [];
  return {
    dir,
    rec,
    log,
    kept,
    refused: () => refused,
    async close() {
      ac.abort();
      await watching;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Waits until `w` says it keeps the source for `reason`, then a little longer for anything it might still apply. */
async function keptSaid(w: Awaited<ReturnType<typeof watched>>, reason: RegExp) {
  await eventually(() => {
    const k = w.kept.at(-1);
    assert(k !== undefined && reason.test(k.reason), `kept for ${reason}: ${JSON.stringify(w.kept)}`);
  }, 5000);
  await new Promise((r) => setTimeout(r, 400));
}

Deno.test("FileSource: a single file that vanishes, empties or loses the Node keeps every object, said once and counted; repaired, it applies", async () => {
  const full = node("node-a") + "---\n" + svc("a", "172.30.0.1") + "---\n" + svc("b", "172.30.0.2");
  const w = await watched({ "objects.yaml": full }, "objects.yaml");
  const f = `${w.dir}/objects.yaml`;
  try {
    await Deno.remove(f);
    await keptSaid(w, /is gone/);
    assertEquals(w.rec.events, [], "nothing deleted");
    assertEquals(w.log.messages("error").filter((m) => m.startsWith("Source change refused")).length, 1);
    assert(w.refused() >= 1, "counted");
    // Written back whole: applied (nothing changed), and said.
    await Deno.writeTextFile(f, full);
    await eventually(() => assertEquals(w.kept.at(-1), undefined), 5000);
    assert(w.log.messages("info").some((m) => m.startsWith("Source usable again")));
    // Truncated as `: > objects.yaml` does.
    await Deno.writeTextFile(f, "");
    await keptSaid(w, /emptied/);
    assertEquals(w.rec.events, []);
    // The Node renamed: every object stays, the NodePorts with them.
    await Deno.writeTextFile(f, full.replace("node-a", "node-b").replace("172.30.0.2", "172.30.0.3"));
    await keptSaid(w, /no longer defines Node "node-a"/);
    assertEquals(w.rec.events, []);
    // A real change with the Node kept applies.
    await Deno.writeTextFile(f, node("node-a") + "---\n" + svc("a", "172.30.0.1"));
    await eventually(() => assertEquals(w.rec.events, ["delete Service ns1/b"]), 5000);
    assertEquals(w.kept.at(-1), undefined);
  } finally {
    await w.close();
  }
});

Deno.test("FileSource: a directory drops a removed file's objects, but keeps everything when it empties or vanishes, and reads it again when it is back", async () => {
  const w = await watched({
    "node.yaml": node("node-a"),
    "a.yaml": svc("a", "172.30.0.1"),
    "b.yaml": svc("b", "172.30.0.2"),
  });
  try {
    await Deno.remove(`${w.dir}/b.yaml`);
    await eventually(() => assertEquals(w.rec.events, ["delete Service ns1/b"]), 5000);
    w.rec.events = [];
    for (const f of ["a.yaml", "node.yaml"]) await Deno.remove(`${w.dir}/${f}`);
    await keptSaid(w, /is gone|emptied/);
    assertEquals(w.rec.events, [], "an emptied directory keeps its objects");
    await Deno.remove(w.dir, { recursive: true });
    await new Promise((r) => setTimeout(r, 1500));
    assertEquals(w.rec.events, [], "a vanished directory keeps its objects");
    await Deno.mkdir(w.dir);
    await Deno.writeTextFile(`${w.dir}/node.yaml`, node("node-a"));
    await Deno.writeTextFile(`${w.dir}/c.yaml`, svc("c", "172.30.0.3"));
    await eventually(() => assertEquals(w.rec.events, ["delete Service ns1/a", "add Service ns1/c"]), 10_000);
    assertEquals(w.kept.at(-1), undefined);
  } finally {
    await w.close();
  }
});

Deno.test("FileSource: a writer slower than any window, holding the file open, never has a prefix applied", async () => {
  const services = Array.from({ length: 6 }, (_, i) => svc(`s${i}`, `172.30.0.${i + 1}`));
  const full = node("node-a") + "---\n" + services.join("---\n");
  const w = await watched({ "objects.yaml": full }, "objects.yaml");
  try {
    const f = await Deno.open(`${w.dir}/objects.yaml`, { write: true, truncate: true });
    const bytes = new TextEncoder().encode(full.replace("172.30.0.6", "172.30.0.60"));
    // 100-byte chunks 1.2 s apart: every window a time-based settle could use passes between them.
    for (let at = 0; at < bytes.length; at += 100) {
      await f.write(bytes.subarray(at, at + 100));
      await new Promise((r) => setTimeout(r, at < 300 ? 1200 : 50));
    }
    assertEquals(w.rec.events, [], "nothing applied while the writer holds the file");
    f.close();
    await eventually(
      () => assertEquals(w.rec.events, ["update Service ns1/s5 172.30.0.6->172.30.0.60"]),
      5000,
    );
    assertEquals(w.kept, [], "nothing refused either: no half-written state was read");
  } finally {
    await w.close();
  }
});
