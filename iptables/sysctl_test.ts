import { assert, assertEquals } from "../tests/support/assert.ts";
import { realKernel, withNamespace } from "../tests/support/namespace.ts";
import { ExecError } from "./executor.ts";
import { type Sysctl, type SysctlKey, SysctlRunner } from "./sysctl.ts";
import { FakeSysctl } from "./testing/fake_sysctl.ts";

const MAX: SysctlKey = "net.netfilter.nf_conntrack_max";
const ESTABLISHED: SysctlKey = "net.netfilter.nf_conntrack_tcp_timeout_established";

/** What a caller sees: the value after a write, or the error's class and the kernel's reason. */
async function outcome(s: Sysctl, key: SysctlKey, value: string): Promise<string> {
  try {
    await s.set(key, value);
    return `ok ${await s.get(key)}`;
  } catch (e) {
    assert(e instanceof ExecError, String(e));
    return `refused: ${/Invalid argument|permission denied|No such file/.exec(e.message)?.[0]}`;
  }
}

const kernel = await realKernel(["sysctl"]);
Deno.test({
  name:
    `sysctl: a write the kernel refuses is an error (procps exits 0 for it), and the fake refuses alike${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    await withNamespace(async (exec) => {
      const real = new SysctlRunner({ exec });
      // The conntrack module's sysctls exist in a namespace once the module is loaded (the host's
      // firewall has it); nf_conntrack_max is writable only in the host's own namespace.
      const before = await real.get(MAX);
      const fake = new FakeSysctl({ [MAX]: before, [ESTABLISHED]: await real.get(ESTABLISHED) });
      fake.refuse.add(MAX);
      for (const s of [real, fake]) {
        assertEquals(await outcome(s, MAX, String(Number(before) + 1)), "refused: Invalid argument");
        assertEquals(await outcome(s, ESTABLISHED, "3600"), "ok 3600");
        assertEquals(
          await outcome(s, "net.netfilter.nf_conntrack_nope" as SysctlKey, "1"),
          "refused: No such file",
        );
      }
      assertEquals(await real.get(MAX), before);
    });
  },
});
