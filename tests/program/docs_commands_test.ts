/**
 * The docs' commands work as written: every fenced shell command of README.md and deploy/README.md
 * that runs from a checkout (`deno task start ...`, or the binary's `kube-proxy-deno ...`, which a
 * checkout runs the same way) and touches nothing (render, trace over rendered or saved rules,
 * explain offline, --version, --help) is run, from the repository's root, as `deno task start` runs
 * it, and must succeed; the README's network-namespace recipe runs line by line as a reader types it
 * (in a namespace of the test's own name); and no command in any document is wrapped across lines.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { realKernel, sh } from "../support/namespace.ts";
import { eventually } from "../support/net_helpers.ts";
import { startArgs } from "../support/program.ts";
import { COMMANDS, DEFAULT_COMMAND } from "../../proxier/commands.ts";

const ROOT = new URL("../..", import.meta.url);

/** Each command line of the fenced `sh` blocks of `file`, its trailing comment removed. */
function shellLines(file: string): string[] {
  const text = Deno.readTextFileSync(new URL(file, ROOT));
  const out: string[] = [];
  for (const block of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const raw of block[1].split("\n")) {
      const line = raw.replace(/\s+#.*$/, "").trim();
      if (line !== "") out.push(line);
    }
  }
  return out;
}

/** The program's arguments of `line` when it is a command that runs from a checkout and touches nothing. */
function safeArgs(line: string): string[] | undefined {
  const m = /^(?:deno task start|kube-proxy-deno)(?: (.*))?$/.exec(line);
  if (m === null || /[$&|;<>`]|\bsudo\b/.test(line)) return undefined;
  const args = (m[1] ?? "").split(/\s+/).filter((a) => a !== "");
  const offline = args.some((a) => a.startsWith("--source=file:") || a.startsWith("--rules"));
  const command = args.find((a) => !a.startsWith("-"));
  if (args.includes("--help") || args.includes("--version")) return args;
  if (command === "render" || ((command === "explain" || command === "trace") && offline)) return args;
  return undefined;
}

Deno.test("docs: every command README.md and deploy/README.md show that runs from a checkout and touches nothing succeeds as written", async () => {
  const ran: string[] = [];
  for (const file of ["README.md", "deploy/README.md"]) {
    for (const line of shellLines(file)) {
      const args = safeArgs(line);
      if (args === undefined) continue;
      const out = await new Deno.Command(Deno.execPath(), {
        args: startArgs(args),
        cwd: ROOT,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const dec = new TextDecoder();
      assertEquals(out.code, 0, `${file}: ${line}\n${dec.decode(out.stderr)}${dec.decode(out.stdout)}`);
      assert(out.stdout.length > 0, `${file}: ${line} printed nothing`);
      ran.push(`${file}: ${line}`);
    }
  }
  // The docs show every command in the form a checkout runs; each that reads rendered rules offline
  // (its own flags include --source's reading of a file, not only live rules) is run here.
  const shown = ["README.md", "deploy/README.md"].flatMap(shellLines);
  for (const { name } of [...COMMANDS.values()].filter((c) => c !== DEFAULT_COMMAND)) {
    assert(
      shown.some((l) => l.startsWith(`deno task start ${name} `)),
      `the docs show ${name} from a checkout`,
    );
  }
  for (const command of ["render", "explain", "trace"]) {
    assert(
      ran.some((r) => r.includes(`deno task start ${command} `)),
      `the docs run ${command} from a checkout: ${ran.join("; ")}`,
    );
  }
});

/** The README's namespace recipe: its lines, in order, each naming the namespace it makes. */
const RECIPE_NAMESPACE = "kpd-try";

const kernel = await realKernel(["nft", "curl"]);

Deno.test({
  name: `docs: the README's network-namespace recipe runs as written${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    const lines = shellLines("README.md").filter((l) => l.includes(RECIPE_NAMESPACE));
    const ns = `kpd-${crypto.randomUUID().slice(0, 8)}-docs`;
    // As the reader types it, as root (the test is), in a namespace only this test uses; `deno`
    // is the one running the suite.
    const asTyped = (line: string) =>
      line.replaceAll(RECIPE_NAMESPACE, ns).replace(/\bsudo /g, "").replace(
        /\bdeno task /g,
        `"${Deno.execPath()}" task `,
      );
    const bash = (line: string) =>
      new Deno.Command("bash", { args: ["-c", asTyped(line)], cwd: ROOT, stdout: "piped", stderr: "piped" });
    const dec = new TextDecoder();
    const said = new Map<string, string>();
    let proxy: Deno.ChildProcess | undefined;
    try {
      for (const line of lines) {
        if (/deno task start --/.test(line)) {
          // The proxy itself: runs until Ctrl-C, the rest of the recipe beside it.
          proxy = bash(line).spawn();
          continue;
        }
        // The first question may come before the first sync is in: the reader asks again.
        const out = await eventually(async () => {
          const o = await bash(line).output();
          if (o.code !== 0) throw new Error(`${line} exited ${o.code}: ${dec.decode(o.stderr)}`);
          return dec.decode(o.stdout);
        });
        said.set(line, out);
      }
      const answer = (what: string) => [...said].find(([l]) => l.includes(what))?.[1] ?? "";
      assert(proxy !== undefined, `the recipe starts the proxy: ${lines.join("; ")}`);
      assertMatch(answer("/healthz"), /"lastUpdated"/);
      assertMatch(answer("/readyz"), /"ready":true/);
      assertMatch(
        answer("/metrics"),
        /^kubeproxy_sync_proxy_rules_last_timestamp_seconds\{ip_family="IPv4"\} [0-9.e+]+$/m,
      );
      assertMatch(answer("nft list"), /172\.30\.0\.10 \. tcp \. 80/);
    } finally {
      // Ctrl-C, then the README's `ip netns del`.
      for (const pid of (await sh("ip", ["netns", "pids", ns], { allowFail: true })).split(/\s+/)) {
        if (pid !== "") await sh("kill", ["-INT", pid], { allowFail: true });
      }
      const status = await proxy?.status;
      await proxy?.stdout.cancel();
      await proxy?.stderr.cancel();
      await sh("ip", ["netns", "del", ns], { allowFail: true });
      if (status !== undefined) assertEquals(status.code, 0, "the proxy stops cleanly at Ctrl-C");
    }
  },
});

Deno.test("docs: no inline command or code in any document is wrapped across lines of the raw Markdown", () => {
  const wrapped: string[] = [];
  const walk = (dir: URL) => {
    for (const e of Deno.readDirSync(dir)) {
      const url = new URL(e.name + (e.isDirectory ? "/" : ""), dir);
      if (e.isDirectory && ![".git", "node_modules", "testdata"].includes(e.name)) walk(url);
      if (!e.isFile || !e.name.endsWith(".md")) continue;
      let fenced = false;
      Deno.readTextFileSync(url).split("\n").forEach((line, i) => {
        if (/^\s*```/.test(line)) fenced = !fenced;
        // A span opened and not closed on its line (double-backtick spans aside) runs into the next.
        else if (!fenced && (line.match(/(?<!`)`(?!`)/g) ?? []).length % 2 === 1) {
          wrapped.push(`${url.pathname.slice(ROOT.pathname.length)}:${i + 1}: ${line}`);
        }
      });
    }
  };
  walk(ROOT);
  assertEquals(wrapped, []);
});
