/**
 * Hostile YAML is refused with its file, line and the limit's name, in bounded memory, by every
 * command that reads it and for every input (the file source, `--config`, the kubeconfig): an
 * alias bomb, a merge-key bomb, deep nesting, a huge scalar, very many documents, a file over the
 * size limit. The program runs as `deno task start` runs it; its peak resident memory is read from
 * the kernel while it runs.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { startArgs } from "../support/program.ts";
import { realKernel, sh } from "../support/namespace.ts";

/** The most a refusal may take: the runtime's floor (~50 MiB) and the parse of a few MiB of text. */
const PEAK_MIB = 250;

/**
 * Runs the program on `args` (inside network namespace `ns` when given: `ip netns exec` becomes the
 * program, same pid); returns its exit code, stderr and peak RSS (VmHWM) in MiB.
 */
async function runMeasured(
  args: string[],
  ns?: string,
): Promise<{ code: number; stderr: string; peakMiB: number }> {
  const [cmd, ...rest] = ns === undefined
    ? [Deno.execPath(), ...startArgs(args)]
    : ["ip", "netns", "exec", ns, Deno.execPath(), ...startArgs(args)];
  const child = new Deno.Command(cmd, { args: rest, stdout: "null", stderr: "piped" }).spawn();
  let peakKiB = 0;
  let done = false;
  const poll = (async () => {
    while (!done) {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(await Deno.readTextFile(`/proc/${child.pid}/status`));
        if (m) peakKiB = Math.max(peakKiB, Number(m[1]));
      } catch { /* exited */ }
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const out = await child.output();
  done = true;
  await poll;
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr), peakMiB: peakKiB / 1024 };
}

/** Nine nested levels of nine aliases each: 9^9 leaves once expanded, 600 bytes as written. */
function aliasBomb(levels = 9): string {
  let t = "apiVersion: v1\nkind: Service\nmetadata: {namespace: ns, name: bomb}\n";
  t += `x0: &a0 [${Array(9).fill("lol").join(", ")}]\n`;
  for (let i = 1; i < levels; i++) t += `x${i}: &a${i} [${Array(9).fill(`*a${i - 1}`).join(", ")}]\n`;
  return t;
}

/** Merge keys that merge merges: every level's mapping takes every key of the level below, many times. */
function mergeBomb(): string {
  let t = `m0: &m0 {${Array.from({ length: 200 }, (_, i) => `k${i}: ${i}`).join(", ")}}\n`;
  for (let i = 1; i < 80; i++) t += `m${i}: &m${i}\n  <<: [*m${i - 1}, *m${i - 1}, *m${i - 1}]\n  l${i}: 1\n`;
  return t;
}

const node = "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n---\n";

/** The proxy's start (which would program the node were its input accepted) runs in a namespace of its own. */
const kernel = await realKernel(["nft"]);

/** Runs `fn` with a fresh network namespace's name; it is deleted afterwards, even on failure. */
async function inNamespace<T>(fn: (ns: string) => Promise<T>): Promise<T> {
  const ns = `kpd-${crypto.randomUUID().slice(0, 8)}-yaml`;
  await sh("ip", ["netns", "add", ns]);
  try {
    return await fn(ns);
  } finally {
    await sh("ip", ["netns", "del", ns], { allowFail: true });
  }
}

Deno.test({
  name:
    `hostile YAML: every shape is refused with FILE:LINE and the limit, in bounded memory, by render and the proxy's start${kernel.note}`,
  ignore: kernel.ignore,
  fn: () =>
    inNamespace(async (ns) => {
      const dir = await Deno.makeTempDir({ prefix: "kpd-hostile-" });
      try {
        const cases: Array<{ name: string; text?: string; sparseBytes?: number; expect: RegExp }> = [
          {
            name: "alias-bomb.yaml",
            text: node + aliasBomb(),
            expect: /:\d+: .*\(maxAliases\)|\(maxExpandedNodes\)/,
          },
          {
            name: "alias-seven.yaml",
            text: node + aliasBomb(7),
            expect: /:\d+: .*\((maxAliases|maxExpandedNodes)\)/,
          },
          { name: "merge-bomb.yaml", text: node + mergeBomb(), expect: /:\d+: .*\(maxMergeKeys\)/ },
          {
            name: "deep.yaml",
            text: node + `a: ${"[".repeat(5000)}${"]".repeat(5000)}\n`,
            expect: /:\d+: .*\(maxDepth\)/,
          },
          {
            name: "scalar.yaml",
            text: node + `a: "${"x".repeat(5 * 1024 * 1024)}"\n`,
            expect: /:\d+: .*\(maxScalarChars\)/,
          },
          { name: "documents.yaml", text: node + "---\n".repeat(1_100_000), expect: /\(maxDocuments\)/ },
          { name: "huge.yaml", sparseBytes: 300 * 1024 * 1024, expect: /over the limit of \d+ \(maxBytes\)/ },
        ];
        for (const c of cases) {
          const path = `${dir}/${c.name}`;
          if (c.text !== undefined) await Deno.writeTextFile(path, c.text);
          else {
            const f = await Deno.open(path, { write: true, create: true });
            await f.truncate(c.sparseBytes);
            f.close();
          }
          for (
            const [args, where] of [[["render", "--proxy-mode=nftables"], undefined], [[
              "--proxy-mode=nftables",
            ], ns]] as const
          ) {
            const r = await runMeasured(
              [...args, `--source=file:${path}`, "--hostname-override=node-a"],
              where,
            );
            const what = `${args.join(" ")} ${c.name}`;
            assertEquals(r.code, 1, `${what}: ${r.stderr}`);
            assertMatch(r.stderr, c.expect, what);
            assert(r.stderr.includes(path), `${what} names the file: ${r.stderr}`);
            assert(r.peakMiB < PEAK_MIB, `${what}: peak RSS ${r.peakMiB.toFixed(0)} MiB`);
          }
        }
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
});

Deno.test({
  name:
    `hostile YAML: --config and the kubeconfig are held to the same limits (exit 2 and 1, FILE:LINE, the limit)${kernel.note}`,
  ignore: kernel.ignore,
  fn: () =>
    inNamespace(async (ns) => {
      const dir = await Deno.makeTempDir({ prefix: "kpd-hostile-" });
      try {
        const config = `${dir}/config.conf`;
        await Deno.writeTextFile(
          config,
          "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" +
            aliasBomb().split("\n").slice(3)
              .join("\n"),
        );
        const c = await runMeasured([`--config=${config}`], ns);
        assertEquals(c.code, 2, c.stderr);
        assertMatch(c.stderr, new RegExp(`--config: ${config}:\\d+: .*\\((maxAliases|maxExpandedNodes)\\)`));
        assert(c.peakMiB < PEAK_MIB, `--config: peak RSS ${c.peakMiB.toFixed(0)} MiB`);
        const kubeconfig = `${dir}/kubeconfig`;
        await Deno.writeTextFile(
          kubeconfig,
          `apiVersion: v1\nkind: Config\n${"clusters: ".padEnd(10)}${"[".repeat(5000)}\n`,
        );
        const k = await runMeasured([
          `--kubeconfig=${kubeconfig}`,
          "--hostname-override=node-a",
          "--proxy-mode=nftables",
        ], ns);
        assertEquals(k.code, 1, k.stderr);
        assertMatch(k.stderr, new RegExp(`kubeconfig ${kubeconfig}:\\d+: .*\\(maxDepth\\)`));
        assert(k.peakMiB < PEAK_MIB, `kubeconfig: peak RSS ${k.peakMiB.toFixed(0)} MiB`);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
});
