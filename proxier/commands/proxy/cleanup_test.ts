import { assertEquals } from "../../../tests/support/assert.ts";
import { MemoryLogger } from "../../../tests/support/fixtures.ts";
import { DryRunExecutor } from "../../../iptables/dry_run.ts";
import { ExecError } from "../../../iptables/executor.ts";
import { cleanupModes, runCleanup } from "./cleanup.ts";
import type { ProxyModeDefinition } from "../../mode_definition.ts";
import { MODES } from "../../modes.ts";
import type { ProxyMode } from "../../options/config.ts";

/** A mode whose cleanup records its calls and fails as told. */
function mode(name: ProxyMode, calls: string[], fail?: Error): ProxyModeDefinition {
  return {
    ...MODES.get(name)!,
    name,
    tools: [],
    create: () => Promise.reject(new Error("not here")),
    cleanup: (_exec, family, opts) => {
      calls.push(`${name} ${family} everything=${opts?.everything}`);
      return fail === undefined ? Promise.resolve([`3 chains`]) : Promise.reject(fail);
    },
  };
}

Deno.test("cleanup: --cleanup removes every mode in both families; a missing tool is nothing to clean, another failure is named and the rest still runs", async () => {
  const calls: string[] = [];
  const log = new MemoryLogger();
  const modes = [
    mode("ipvs", calls, new ExecError("ipvsadm: not found")),
    mode("iptables", calls, new Error("iptables-restore: exit 4")),
    mode("nftables", calls),
  ];
  const context = {
    modes: new Map(modes.map((m) => [m.name, m])),
    exec: new DryRunExecutor(),
    log,
    interfaceAddresses: () => [],
  };
  assertEquals(await runCleanup(context), 1);
  // Each family: what each mode's own chains show it wrote, then what is left of every mode's names.
  const pass = (family: string, everything: boolean) =>
    ["ipvs", "iptables", "nftables"].map((m) => `${m} ${family} everything=${everything}`);
  assertEquals(calls, [
    ...pass("IPv4", false),
    ...pass("IPv4", true),
    ...pass("IPv6", false),
    ...pass("IPv6", true),
  ]);
  assertEquals(
    log.records.filter((r) => r.level === "error").map((r) => `${r.fields?.mode} ${r.fields?.family}`),
    ["iptables IPv4", "iptables IPv4", "iptables IPv6", "iptables IPv6"],
  );
  assertEquals(log.records.filter((r) => r.level === "info").map((r) => [r.msg, r.fields?.removed]), [
    ["Removed the nftables mode's rules", "IPv4: 3 chains; IPv6: 3 chains"],
    [
      "Removed leftovers whose mode cannot be told (names more than one mode uses)",
      "IPv4: 3 chains; IPv6: 3 chains",
    ],
    ["Cleanup done", undefined],
  ]);
});

Deno.test("cleanup: a start removes the other modes' objects only, sparing the names modes share", async () => {
  const calls: string[] = [];
  const [ipvs, iptables] = [mode("ipvs", calls), mode("iptables", calls)];
  const log = new MemoryLogger();
  assertEquals(
    await cleanupModes([ipvs, iptables], new DryRunExecutor(), log, { interfaceIPs: [], keep: iptables }),
    { ok: true, removed: true },
  );
  assertEquals(calls, ["ipvs IPv4 everything=false", "ipvs IPv6 everything=false"]);
  // What went is said at the default verbosity: one line for the mode, with each family's.
  assertEquals(log.records.filter((r) => r.level === "info"), [{
    level: "info",
    msg: "Removed the ipvs mode's rules",
    fields: { mode: "ipvs", removed: "IPv4: 3 chains; IPv6: 3 chains" },
  }]);
});
