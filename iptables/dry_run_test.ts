import { assertEquals } from "../tests/support/assert.ts";
import { DryRunExecutor } from "./dry_run.ts";
import { IptablesRunner } from "./iptables.ts";

Deno.test("DryRunExecutor records commands and their input, and answers like an empty kernel", async () => {
  const dry = new DryRunExecutor();
  const ipt = new IptablesRunner({ exec: dry, family: "IPv6" });
  assertEquals(await ipt.save("nat"), "");
  await ipt.restoreAll("*nat\nCOMMIT\n", { flush: false, counters: false });
  assertEquals(dry.commands.map((c) => [c.cmd, ...c.args].join(" ")), [
    "ip6tables-save -t nat",
    "ip6tables-restore -w 5 --noflush",
  ]);
  assertEquals(dry.lastInput("ip6tables-restore"), "*nat\nCOMMIT\n");
  assertEquals(dry.lastInput("iptables-restore"), undefined);
});
