/**
 * The demo: two backends on 127.0.0.1 that answer with their own name, and the proxy in
 * userspace mode serving them on NodePort 30080 from `objects.yaml` beside it. Runs until Ctrl-C, or
 * until whatever launched it (`npx ... task demo`) is gone.
 * @module
 */
import process from "node:process";
import { main } from "../main.ts";
import { flushLogging } from "../proxier/runtime/logger.ts";

const enc = new TextEncoder();
const say = (text: string) => Deno.stderr.writeSync(enc.encode(text));

const backends = [{ name: "backend-a", port: 18081 }, { name: "backend-b", port: 18082 }];
const ac = new AbortController();
for (const b of backends) {
  try {
    Deno.serve(
      { hostname: "127.0.0.1", port: b.port, signal: ac.signal, onListen() {} },
      () => new Response(`hello from ${b.name}\n`),
    );
  } catch (e) {
    if (!(e instanceof Deno.errors.AddrInUse)) throw e;
    say(`demo: 127.0.0.1:${b.port} is in use (is another demo still running?)\n`);
    Deno.exit(1);
  }
}

/** Returns the parent pid of `pid` (ps(1): Deno's permissions keep /proc closed), or 0. */
async function parentOf(pid: number): Promise<number> {
  try {
    const out = await new Deno.Command("ps", { args: ["-o", "ppid=", "-p", String(pid)], stderr: "null" })
      .output();
    return Number(new TextDecoder().decode(out.stdout).trim()) || 0;
  } catch {
    return -1; // no ps: cannot tell
  }
}

// `npx` and `deno task` each run the next step as a child; a SIGTERM to npx stops only npx and its
// shell, so the demo watches its parent and grandparent and stops when either goes away.
const launcher = { parent: process.ppid, grandparent: await parentOf(process.ppid) };
const watchdog = setInterval(async () => {
  const gone = process.ppid !== launcher.parent ||
    (launcher.grandparent > 1 && await parentOf(launcher.parent) !== launcher.grandparent);
  if (gone && !ac.signal.aborted) {
    say("demo: the launcher is gone; stopping\n");
    ac.abort();
  }
}, 1000);

const source = new URL("./objects.yaml", import.meta.url).pathname;
setTimeout(() => {
  const text = "\nDemo running. In another terminal, run this a few times:\n\n" +
    "    curl http://127.0.0.1:30080/\n\nand watch the answers alternate between backend-a and backend-b. Ctrl-C stops.\n\n";
  Deno.stdout.writeSync(enc.encode(text));
}, 500);
const code = await main([
  "--proxy-mode=userspace",
  `--source=file:${source}`,
  "--hostname-override=demo-node",
  "--userspace-portals=false",
  "--healthz-bind-address=127.0.0.1:10256",
  "--metrics-bind-address=127.0.0.1:10249",
  // The demo is not the node's proxy: it leaves the kernel's conntrack table and its own OOM
  // preference as they are (as k3s runs kube-proxy with --conntrack-max-per-core=0).
  "--conntrack-max-per-core=0",
  "--conntrack-tcp-timeout-established=0",
  "--conntrack-tcp-timeout-close-wait=0",
  "--oom-score-adj=0",
], { stop: ac.signal });
clearInterval(watchdog);
ac.abort();
await flushLogging();
Deno.exit(code);
