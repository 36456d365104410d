import { assertEquals, assertRejects } from "../tests/support/assert.ts";
import { realKernel, withNamespace } from "../tests/support/namespace.ts";
import { ExecError } from "./executor.ts";
import { NfacctRunner, parseNfacct } from "./nfacct.ts";

Deno.test("nfacct: totals parse from nfacct's own output; a name that could inject is refused", async () => {
  const out =
    "{ pkts = 00000000000000000042, bytes = 00000000000000004200 } = ct_state_invalid_dropped_pkts;\n";
  assertEquals(parseNfacct(out, "ct_state_invalid_dropped_pkts"), { packets: 42, bytes: 4200 });
  assertEquals(parseNfacct(out, "localhost_nps_accepted_pkts"), undefined);
  const exec = { run: () => Promise.resolve({ code: 0, stdout: "", stderr: "" }) };
  await assertRejects(() => new NfacctRunner({ exec }).ensure("x; reboot"), ExecError);
});

const { ignore, note } = await realKernel(["nfacct", "iptables-nft-restore", "busybox"]);

Deno.test({
  name: `nfacct on the real kernel: ensure keeps an existing counter, a -m nfacct rule counts into it${note}`,
  ignore,
  async fn() {
    await withNamespace(async (exec) => {
      const nfacct = new NfacctRunner({ exec });
      assertEquals(await nfacct.get("ct_state_invalid_dropped_pkts"), undefined);
      await nfacct.ensure("ct_state_invalid_dropped_pkts");
      await nfacct.ensure("ct_state_invalid_dropped_pkts");
      const rules =
        "*filter\n-A OUTPUT -o lo -m nfacct --nfacct-name ct_state_invalid_dropped_pkts\nCOMMIT\n";
      assertEquals((await exec.run("iptables-nft-restore", { args: ["--noflush"], stdin: rules })).code, 0);
      // Two packets out on loopback: busybox's ping (installed with the VM harness's busybox-static).
      await exec.run("busybox", { args: ["ping", "-c", "2", "-W", "1", "127.0.0.1"] });
      const t = await nfacct.get("ct_state_invalid_dropped_pkts");
      assertEquals(t !== undefined && t.packets >= 2, true, JSON.stringify(t));
    });
  },
});
