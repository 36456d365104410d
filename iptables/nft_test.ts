import { assert, assertEquals, assertMatch, assertRejects } from "../tests/support/assert.ts";
import { ExecError, type ExecOptions, type ExecResult, type Executor, inputText } from "./executor.ts";
import { NftError, NftRunner, parseNftVersion, versionAtLeast } from "./nft.ts";
import { realKernel, withNamespace } from "../tests/support/namespace.ts";

/** Answers every command with `result`, recording what was asked. */
class Scripted implements Executor {
  readonly calls: Array<{ cmd: string; args: readonly string[]; stdin?: string }> = [];
  constructor(readonly result: (args: readonly string[]) => ExecResult) {}
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    this.calls.push({
      cmd,
      args: opts.args,
      stdin: opts.stdin === undefined ? undefined : inputText(opts.stdin),
    });
    return Promise.resolve(this.result(opts.args));
  }
}

Deno.test("NftRunner: a failed transaction names the exit code and the offending line", async () => {
  const exec = new Scripted(() => ({
    code: 1,
    stdout: "",
    stderr:
      "/dev/stdin:3:22-28: Error: Could not process rule: No such file or directory\nadd rule ...\n   ^^^\n",
  }));
  const nft = new NftRunner({ exec, family: "IPv6" });
  const e = await assertRejects(
    () => nft.apply("add table ip6 t\nadd chain ip6 t c\nadd rule ip6 t c jump x\n"),
    NftError,
  );
  assertEquals([e.code, e.lineNumber, e.line], [1, 3, "add rule ip6 t c jump x"]);
  assertMatch(
    e.message,
    /^nft -f - exited 1: .*No such file or directory \(line 3: add rule ip6 t c jump x\)$/,
  );
  assertEquals(exec.calls[0], {
    cmd: "nft",
    args: ["-f", "-"],
    stdin: "add table ip6 t\nadd chain ip6 t c\nadd rule ip6 t c jump x\n",
  });
  // The same transaction as its statements: nft reads the same text, and the line is named alike.
  const statements = ["add table ip6 t", "add chain ip6 t c", "add rule ip6 t c jump x"];
  const again = await assertRejects(() => nft.apply(statements), NftError);
  assertEquals([again.lineNumber, again.line, again.message], [3, "add rule ip6 t c jump x", e.message]);
  assertEquals(exec.calls[1].stdin, exec.calls[0].stdin);
});

Deno.test("NftRunner: lists one table's chains, reading that table alone (undefined without it), and a map's elements", async () => {
  const exec = new Scripted((args) => {
    const doc = args.includes("chains")
      ? {
        nftables: [
          { chain: { family: "ip6", table: "other", name: "x" } },
          { chain: { family: "ip6", table: "t", name: "c" } },
          { chain: { family: "ip6", table: "t", name: "h", type: "filter", hook: "input", prio: -110 } },
        ],
      }
      : {
        nftables: [{
          map: {
            name: "m",
            elem: [[{ elem: { val: { concat: ["fd00::1", "fd00:30::1", "tcp", 80] }, timeout: 10 } }, {
              concat: ["fd00:180::1", 8080],
            }]],
          },
        }],
      };
    return { code: 0, stdout: JSON.stringify(doc), stderr: "" };
  });
  const nft = new NftRunner({ exec, family: "IPv6" });
  assertEquals(await nft.listChains("t"), [
    { name: "c", base: undefined },
    { name: "h", base: { type: "filter", hook: "input", priority: -110 } },
  ]);
  assertEquals(await nft.listChains("missing"), undefined);
  // Chain names only: nft reads no rule, set or element of any table.
  assertEquals(exec.calls.slice(0, 2).map((c) => c.args.join(" ")), [
    "-j list chains ip6",
    "-j list chains ip6",
  ]);
  assertEquals(await nft.listElements("t", "m"), [{
    key: ["fd00::1", "fd00:30::1", "tcp", "80"],
    value: ["fd00:180::1", "8080"],
  }]);
});

Deno.test("NftRunner: a listing stopped by its signal fails at once and runs no second nft (nft reads the table's elements before it says a map is no set)", async () => {
  const asked: string[] = [];
  const ac = new AbortController();
  const exec: Executor = {
    run(_cmd, opts) {
      asked.push(opts.args.join(" "));
      if (opts.args.includes("chains")) {
        const doc = { nftables: [{ chain: { family: "ip", table: "t", name: "c" } }] };
        return Promise.resolve({ code: 0, stdout: JSON.stringify(doc), stderr: "" });
      }
      // The map's listing runs until it is killed, as a listing of a large map is at scale.
      return new Promise((resolve) =>
        opts.signal?.addEventListener("abort", () => resolve({ code: 143, stdout: "", stderr: "" }))
      );
    },
  };
  const listing = new NftRunner({ exec, family: "IPv4" }).listElements("t", "m", ac.signal);
  await new Promise((r) => setTimeout(r, 10));
  ac.abort();
  await assertRejects(() => listing, ExecError);
  assertEquals(asked, ["-j list chains ip", "-j list map ip t m"]);
});

Deno.test("nft versions parse and compare", () => {
  const v = parseNftVersion("nftables v1.0.6 (Lester Gooch #5)")!;
  assertEquals([v.major, v.minor, v.patch], [1, 0, 6]);
  assertEquals(versionAtLeast(v, [1, 0, 1]), true);
  assertEquals(versionAtLeast(parseNftVersion("nftables v0.9.8 (E.D.S.)")!, [1, 0, 1]), false);
  assertEquals(parseNftVersion("garbage"), undefined);
});

const { ignore: noKernel, note } = await realKernel(["nft"]);

Deno.test({
  name: `NftRunner on the real nft: finding our chains reads no set, however large, of any table${note}`,
  ignore: noKernel,
  async fn() {
    await withNamespace(async (netns) => {
      const asked: string[] = [];
      const exec: Executor = {
        run: (cmd, opts) => {
          asked.push(`${cmd} ${opts.args.join(" ")}`);
          return netns.run(cmd, opts);
        },
      };
      const nft = new NftRunner({ exec, family: "IPv4" });
      const foreign = ["add table ip foreign", "add set ip foreign big { type ipv4_addr; }"];
      for (let i = 0; i < 20_000; i += 5_000) {
        const elems = Array.from(
          { length: 5_000 },
          (_, j) => `10.${(i + j) >> 16 & 255}.${(i + j) >> 8 & 255}.${(i + j) & 255}`,
        );
        foreign.push(`add element ip foreign big { ${elems.join(", ")} }`);
      }
      await nft.apply(foreign.join("\n") + "\n");
      assertEquals(await nft.listChains("kube-proxy"), undefined);
      await nft.apply(
        "add table ip kube-proxy\nadd chain ip kube-proxy services\nadd set ip kube-proxy s { type ipv4_addr; }\n",
      );
      assertEquals(await nft.listChains("kube-proxy"), [{ name: "services", base: undefined }]);
      assertEquals(asked.filter((a) => a.includes(" list ")), [
        "nft -j list chains ip",
        "nft -j list chains ip",
      ]);
      // 20,000 elements in another table and ours: the listing fetched none of them.
      const t = performance.now();
      await nft.listChains("kube-proxy");
      const listMs = performance.now() - t;
      const r = await netns.run("nft", { args: ["-j", "list", "chains", "ip"] });
      assert(!r.stdout.includes("10.0.0."), "no element in the answer");
      assert(listMs < 1000, `${listMs} ms`);
    });
  },
});
