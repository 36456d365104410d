import { assertEquals, assertMatch, assertRejects } from "../tests/support/assert.ts";
import { commandWorks, holdXtablesLock, netnsAvailable, withNamespace } from "../tests/support/namespace.ts";
import { ExecError, type ExecOptions, type ExecResult, type Executor } from "./executor.ts";
import { IptablesRunner } from "./iptables.ts";

/** Runs every command with `env`'s variables set (the xtables lock file of the test's own). */
class WithEnv implements Executor {
  constructor(readonly inner: Executor, readonly env: Record<string, string>) {}
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    const vars = Object.entries(this.env).map(([k, v]) => `${k}=${v}`);
    return this.inner.run("env", { ...opts, args: [...vars, cmd, ...opts.args] });
  }
}

const JUMP = ["-m", "comment", "--comment", "test", "-j", "KUBE-TEST"];
const canRun = async (backend: string) => await netnsAvailable() && await commandWorks(`iptables-${backend}`);

for (const backend of ["nft", "legacy"] as const) {
  Deno.test({
    name:
      `real iptables (${backend}): a missing rule, chain or jump target reads as absent, never as an error`,
    ignore: !(await canRun(backend)),
    async fn() {
      await withNamespace(async (exec) => {
        const ipt = new IptablesRunner({ exec, family: "IPv4", backend });
        assertEquals(await ipt.chainExists("nat", "KUBE-TEST"), false);
        assertEquals(await ipt.listRules("nat", "KUBE-TEST"), undefined);
        // A jump to a chain that does not exist: exit 2, "Couldn't load target" / "does not exist".
        await ipt.deleteRule("nat", "PREROUTING", JUMP);
        assertEquals(await ipt.ensureChain("nat", "KUBE-TEST"), false);
        assertEquals(await ipt.ensureRule("prepend", "nat", "PREROUTING", JUMP), false);
        assertEquals(await ipt.ensureRule("prepend", "nat", "PREROUTING", JUMP), true);
        assertEquals((await ipt.listRules("nat", "PREROUTING"))?.length, 1);
        await ipt.deleteRule("nat", "PREROUTING", JUMP);
        await ipt.deleteChain("nat", "KUBE-TEST");
        assertEquals(await ipt.chainExists("nat", "KUBE-TEST"), false);
      });
    },
  });
}

for (const backend of ["nft", "legacy"] as const) {
  Deno.test({
    name:
      `real iptables (${backend}): which chains a table declares, asked chain by chain, without creating the table${
        backend === "nft" ? " or saving it" : ""
      }`,
    ignore: !(await canRun(backend)),
    async fn() {
      await withNamespace(async (ns) => {
        const asked: string[] = [];
        const exec: Executor = {
          run: (cmd, opts) => (asked.push(`${cmd} ${opts.args.join(" ")}`), ns.run(cmd, opts)),
        };
        const ipt = new IptablesRunner({ exec, family: "IPv4", backend });
        assertEquals(await ipt.existingChains("nat", ["KUBE-TEST", "KUBE-OTHER"]), []);
        assertEquals(await ipt.tables(), new Set(), "the fresh namespace still holds no table");
        await ipt.ensureChain("nat", "KUBE-TEST");
        asked.length = 0;
        assertEquals(await ipt.existingChains("nat", ["KUBE-TEST", "KUBE-OTHER"]), ["KUBE-TEST"]);
        // nf_tables: a read names a table without creating it, so no save; legacy must look first.
        assertEquals(asked.some((a) => a.includes("-save")), backend === "legacy", asked.join("\n"));
      });
    },
  });
}

Deno.test({
  name: "real iptables (legacy): the xtables lock held past -w is an error naming it, not an absent rule",
  ignore: !(await canRun("legacy")) || !(await commandWorks("flock", ["--version"])),
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "kpd-xtables-lock-" });
    const lock = `${dir}/xtables.lock`;
    try {
      await withNamespace(async (ns) => {
        const ipt = new IptablesRunner({
          exec: new WithEnv(ns, { XTABLES_LOCKFILE: lock }),
          family: "IPv4",
          backend: "legacy",
        });
        await ipt.ensureChain("nat", "KUBE-TEST");
        await ipt.ensureRule("prepend", "nat", "PREROUTING", JUMP);
        // Another process holds the lock longer than the runner's `-w 5`.
        const holder = await holdXtablesLock(lock, 30);
        try {
          // Before, the check's failure read as "no such rule": the delete returned as done and a
          // start under the lock skipped every cleanup without a word.
          const e = await assertRejects(() => ipt.deleteRule("nat", "PREROUTING", JUMP), ExecError);
          assertMatch(e.message, /-C PREROUTING .* exited 4: .*holding the xtables lock/s);
        } finally {
          holder.kill();
          await holder.status;
        }
        assertEquals((await ipt.listRules("nat", "PREROUTING"))?.length, 1);
        await ipt.deleteRule("nat", "PREROUTING", JUMP);
        assertEquals((await ipt.listRules("nat", "PREROUTING"))?.length, 0);
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
