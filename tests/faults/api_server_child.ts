/**
 * The test API server as a child process, so it can run inside the node's network namespace (the
 * program under test reaches it on that namespace's loopback). Prints `{"url": ...}` once
 * listening, then reads one JSON command per stdin line and answers `ok` (or `error ...`) per line:
 * `apply` / `delete` objects, and the faults `dropWatches`, `compact` (history gone, open watches
 * dropped: each resumes into 410 Gone), `restart` (every connection lost at once), `failLists`
 * (the next `n` lists answer 500) and `stall` (open watches dropped, every request waits `ms`).
 * @module
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { TestApiServer } from "../support/api_server.ts";

/** One command on stdin. */
export type ApiCommand =
  | { op: "apply"; resource: string; object: KubernetesObject }
  | { op: "delete"; resource: string; namespace?: string; name: string }
  | { op: "dropWatches" | "compact" | "restart" }
  | { op: "failLists"; n: number }
  | { op: "stall"; ms: number };

const api = new TestApiServer();
console.log(JSON.stringify({ url: api.start() }));
/** Yields stdin's lines as they arrive. */
async function* lines(): AsyncGenerator<string> {
  let pending = "";
  for await (const text of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
    pending += text;
    let nl;
    while ((nl = pending.indexOf("\n")) >= 0) {
      yield pending.slice(0, nl);
      pending = pending.slice(nl + 1);
    }
  }
}

for await (const line of lines()) {
  if (line.trim() === "") continue;
  try {
    const c = JSON.parse(line) as ApiCommand;
    if (c.op === "apply") api.apply(c.resource, c.object);
    else if (c.op === "delete") api.delete(c.resource, c.namespace, c.name);
    else if (c.op === "dropWatches") api.dropWatches();
    else if (c.op === "compact") {
      api.compact();
      api.dropWatches();
    } else if (c.op === "restart") {
      await api.stop();
      // The port comes free a moment after the listener closes.
      for (let tries = 0;; tries++) {
        try {
          api.start();
          break;
        } catch (e) {
          if (!(e instanceof Deno.errors.AddrInUse) || tries > 100) throw e;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    } else if (c.op === "failLists") api.failLists = c.n;
    else if (c.op === "stall") {
      // Open watches go too: their reconnects wait out the stall with every other request.
      api.stallUntil = Date.now() + c.ms;
      if (c.ms > 0) api.dropWatches();
    }
    console.log("ok");
  } catch (e) {
    console.log(`error ${(e as Error).message}`);
  }
}
await api.stop();
