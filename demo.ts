/**
 * The demo: two backends on 127.0.0.1 that answer with their own name, and the proxy in
 * userspace mode serving them on NodePort 30080 from `demo/objects.yaml`. Runs until Ctrl-C.
 * @module
 */
import { main } from "./main.ts";
import { flushLogging } from "./proxier/logger.ts";

const backends = [{ name: "backend-a", port: 18081 }, { name: "backend-b", port: 18082 }];
const ac = new AbortController();
for (const b of backends) {
  Deno.serve(
    { hostname: "127.0.0.1", port: b.port, signal: ac.signal, onListen() {} },
    () => new Response(`hello from ${b.name}\n`),
  );
}
const source = new URL("./demo/objects.yaml", import.meta.url).pathname;
setTimeout(() => {
  const text = "\nDemo running. In another terminal, run this a few times:\n\n" +
    "    curl http://127.0.0.1:30080/\n\nand watch the answers alternate between backend-a and backend-b. Ctrl-C stops.\n\n";
  Deno.stdout.writeSync(new TextEncoder().encode(text));
}, 500);
const code = await main([
  "--proxy-mode=userspace",
  `--source=file:${source}`,
  "--hostname-override=demo-node",
  "--userspace-portals=false",
  "--healthz-bind-address=127.0.0.1:10256",
  "--metrics-bind-address=127.0.0.1:10249",
]);
ac.abort();
await flushLogging();
Deno.exit(code);
