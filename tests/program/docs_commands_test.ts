/**
 * The docs' commands work as written: every fenced shell command of README.md and deploy/README.md
 * that runs from a checkout (`deno task start ...`, or the binary's `kube-proxy-deno ...`, which a
 * checkout runs the same way) and touches nothing (render, trace over rendered or saved rules,
 * explain offline, --version, --help) is run, from the repository's root, as `deno task start` runs
 * it, and must succeed.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { startArgs } from "../support/program.ts";

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
  // The docs show each offline command in the form a checkout runs.
  for (const command of ["render", "explain", "trace"]) {
    assert(
      ran.some((r) => r.includes(`deno task start ${command} `)),
      `the docs run ${command} from a checkout: ${ran.join("; ")}`,
    );
  }
});
