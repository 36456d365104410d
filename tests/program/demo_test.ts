/**
 * The demo as a new user starts it: through a launcher chain like `npx ... task demo` (each step a
 * child process), inside a network namespace so its fixed ports cannot collide with anything.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { type NetnsExecutor, realKernel, sh, withNamespace } from "../support/namespace.ts";
import { eventually } from "../support/net_helpers.ts";
import { CONVERGE_MS } from "../support/bounds.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const { ignore, note } = await realKernel(["ps", "sh"]);

/** The demo task's command (deno.json's `demo` task), with absolute paths. */
function demoCommand(): string {
  const config = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`));
  const words = String(config.tasks.demo).split(/\s+/);
  assertEquals([words[0], words[1], words.at(-1)], ["deno", "run", "demo/main.ts"]);
  return [
    Deno.execPath(),
    "run",
    "--config",
    `${ROOT}deno.json`,
    ...words.slice(2, -1),
    `${ROOT}demo/main.ts`,
  ]
    .join(" ");
}

/** GET http://127.0.0.1:30080/ inside the namespace: the body, or `ERR ...`. */
async function get(exec: { run: NetnsExecutor["run"] }): Promise<string> {
  const code =
    "try { const r = await fetch('http://127.0.0.1:30080/', { signal: AbortSignal.timeout(1000) }); " +
    "console.log(await r.text()) } catch (e) { console.log('ERR ' + e) }";
  return (await exec.run(Deno.execPath(), { args: ["eval", code] })).stdout;
}

Deno.test({
  name: `demo: killing the launcher (not the demo) stops the demo and frees its ports${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withNamespace(async (exec) => {
      // launcher (sh) -> runner (sh) -> demo: as npm exec -> sh -> deno task -> deno run demo/main.ts.
      const launcher = new Deno.Command("ip", {
        args: ["netns", "exec", exec.ns, "sh", "-c", `sh -c '${demoCommand()}; :'; :`],
        stdout: "null",
        stderr: "piped",
      }).spawn();
      // The namespace's processes but the demo's watchdog's own `ps`, which comes and goes each second.
      const pids = async () => {
        const all = (await sh("ip", ["netns", "pids", exec.ns])).trim().split("\n").filter((l) => l);
        if (all.length === 0) return [];
        // One ps for all: `pid comm` per process still there.
        const named = (await sh("ps", ["-o", "pid=,comm=", "-p", all.join(",")], { allowFail: true }))
          .trim().split("\n").map((l) => l.trim().split(/\s+/)).filter((f) => f.length === 2);
        return named.filter(([, comm]) => comm !== "ps").map(([pid]) => pid);
      };
      let said = "";
      const reading = launcher.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
        new WritableStream({ write: (t) => void (said += t) }),
      ).catch(() => {});
      try {
        await eventually(async () => assertMatch(await get(exec), /^hello from backend-[ab]/), CONVERGE_MS);
        assertEquals((await pids()).length, 3, "the launcher, the runner and the demo");
        // The one cause that holds, not a list of possible ones.
        await eventually(
          () =>
            assertMatch(
              said,
              /No portal rules: only NodePorts are served" reason="--userspace-portals=false"/,
            ),
          CONVERGE_MS,
        );
        launcher.kill("SIGTERM");
        await launcher.status;
        // The runner is orphaned; the demo notices its grandparent is gone and exits.
        await eventually(
          async () => assert((await pids()).length <= 1, "at most the runner shell is left"),
          CONVERGE_MS,
        );
        assertMatch(await get(exec), /^ERR/, "nothing answers on 30080 any more");
      } finally {
        for (const pid of await pids()) await sh("kill", ["-KILL", pid], { allowFail: true });
        await reading;
      }
      // Said once for the run, not once per IP family.
      assertEquals(said.match(/No portal rules/g)?.length, 1, said);
    });
  },
});

Deno.test({
  name: `demo: a port already in use is one line naming the port${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withNamespace(async (exec) => {
      const holder = new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          exec.ns,
          Deno.execPath(),
          "eval",
          "Deno.listen({ hostname: '127.0.0.1', port: 18081 }); setTimeout(() => {}, 30_000)",
        ],
      }).spawn();
      try {
        await eventually(async () => {
          const r = await exec.run("ss", { args: ["-Htln", "sport = :18081"] });
          assert(r.stdout.includes("18081"), "the holder listens");
        }, CONVERGE_MS);
        const out = await exec.run("sh", { args: ["-c", demoCommand()] });
        assertEquals(out.code, 1, out.stderr);
        assertEquals(out.stderr, "demo: 127.0.0.1:18081 is in use (is another demo still running?)\n");
      } finally {
        holder.kill("SIGKILL");
        await holder.status;
      }
    });
  },
});
