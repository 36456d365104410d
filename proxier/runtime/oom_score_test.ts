import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { DenoExecutor } from "../../iptables/executor.ts";
import { commandWorks } from "../../tests/support/namespace.ts";
import { applyOomScoreAdj, oomScoreAdj } from "./oom_score.ts";

const haveChoom = await commandWorks("choom", ["--version"]);
Deno.test({
  name: `oom_score_adj: set through choom, read back from the kernel, left alone when in place${
    haveChoom ? "" : " (skipped: choom not installed)"
  }`,
  ignore: !haveChoom,
  async fn() {
    const exec = new DenoExecutor();
    const child = new Deno.Command("sleep", { args: ["30"] }).spawn();
    try {
      assertEquals(await applyOomScoreAdj(exec, child.pid, 500), true);
      assertEquals(Number(await Deno.readTextFile(`/proc/${child.pid}/oom_score_adj`)), 500);
      assertEquals(await oomScoreAdj(exec, child.pid), 500);
      assertEquals(await applyOomScoreAdj(exec, child.pid, 500), false);
      await assertRejects(() => applyOomScoreAdj(exec, child.pid, 1001), RangeError);
    } finally {
      child.kill();
      await child.status;
    }
  },
});
