import type { V1EndpointSlice, V1Node, V1Service } from "@kubernetes/client-node";
import { assertEquals } from "../../tests/assert.ts";
import { MemoryLogger } from "../../tests/fixtures.ts";
import { eventually } from "../../tests/net_helpers.ts";
import { FileSource } from "./file.ts";
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
}

const svc = (name: string, ip: string) =>
  `apiVersion: v1\nkind: Service\nmetadata: {namespace: ns1, name: ${name}}\nspec: {clusterIP: ${ip}, ports: [{port: 80}]}\n`;

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
    const src = new FileSource({ path: dir, nodeName: "node-a", handler: rec, log });
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
    assertEquals(rec.events, []);
    await Deno.remove(`${dir}/a.yaml`);
    await eventually(() => assertEquals(rec.events, ["delete Service ns1/a"]));
    ac.abort();
    await watching;
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});
