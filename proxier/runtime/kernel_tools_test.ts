import { assert, assertEquals } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { iptablesMode } from "../iptables/mode.ts";
import { checkTools, onPath } from "./kernel_tools.ts";
import { CONNTRACK_NEED } from "../conntrack/reconciler.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";

Deno.test("checkTools: each missing tool once; optional ones logged with what stops working", async () => {
  const log = new MemoryLogger();
  const installed = new Set(["iptables-save", "iptables-restore"]);
  const config = { ...defaultConfig(), localhostNodePorts: true };
  const missing = await checkTools(
    [...iptablesMode.tools, CONNTRACK_NEED],
    config,
    (t) => Promise.resolve(installed.has(t)),
    log,
  );
  assertEquals(missing.map((m) => m.tool), ["conntrack", "nfacct", "sysctl"]);
  assertEquals(log.messages("warn").length, 3);
  assert(
    log.messages("warn")[1].startsWith(
      "nfacct is not installed: kubeproxy_iptables_ct_state_invalid_dropped",
    ),
  );
  assert(
    log.messages("warn")[0].startsWith(
      "conntrack is not installed: stale UDP conntrack entries are not cleared",
    ),
  );
  // Without localhost NodePorts sysctl is not needed; without iptables the mode cannot run.
  installed.delete("iptables-restore");
  const again = await checkTools(
    iptablesMode.tools,
    { ...config, localhostNodePorts: false },
    (t) => Promise.resolve(installed.has(t)),
    new MemoryLogger(),
  );
  assertEquals(again.map((m) => [m.tool, m.required]), [
    ["iptables-restore", true],
    ["conntrack", false],
    ["nfacct", false],
  ]);
});

Deno.test("onPath finds executables in PATH's directories only", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/tool`, "#!/bin/sh\n", { mode: 0o755 });
    await Deno.writeTextFile(`${dir}/data`, "", { mode: 0o644 });
    assertEquals(await onPath("tool", `/nonexistent:${dir}`), true);
    assertEquals(await onPath("data", dir), false);
    assertEquals(await onPath("tool", "/nonexistent"), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
