/**
 * What `--cleanup` does, and what a start does to other modes' leftovers: every mode's (and upstream
 * kube-proxy's same mode's) kernel objects removed in both families, each mode through its own
 * `cleanup` (`proxier/<mode>/cleanup.ts`), in registry order.
 * @module
 */
import { ExecError, type Executor } from "../../../iptables/executor.ts";
import type { CommandContext } from "../../command_definition.ts";
import type { ProxyModeDefinition } from "../../mode_definition.ts";
import type { Logger } from "../../runtime/logger.ts";

/**
 * Removes the kernel objects of every mode in `modes` but `keep` (all of them with `--cleanup`), in
 * both families. With `keep` (a start), chain names modes share are removed only where the other
 * mode's own chains show it ran; a mode in `draining` keeps its datapath. A tool that is not installed has nothing to clean; any other
 * failure is logged and the rest still runs. Returns false when something failed.
 */
export async function cleanupModes(
  modes: Iterable<ProxyModeDefinition>,
  exec: Executor,
  log: Logger,
  o: {
    /** This machine's interface addresses (where NodePorts answer). */
    readonly interfaceIPs: readonly string[];
    readonly keep?: ProxyModeDefinition;
    readonly draining?: ReadonlySet<ProxyModeDefinition>;
  },
): Promise<boolean> {
  const { keep, draining = new Set() } = o;
  let ok = true;
  const all = [...modes];
  for (const family of ["IPv4", "IPv6"] as const) {
    for (const mode of all) {
      if (mode === keep) continue;
      try {
        await mode.cleanup(exec, family, {
          everything: keep === undefined,
          keepDatapath: draining.has(mode),
          interfaceIPs: o.interfaceIPs,
        });
      } catch (e) {
        if (e instanceof ExecError && e.code === -1) continue; // the tool is not installed
        ok = false;
        log.error("Cleanup failed", { mode: mode.name, family, error: (e as Error).message });
      }
    }
  }
  return ok;
}

/** `--cleanup`: every mode's kernel objects, in both families; returns the exit code (1: something failed). */
export async function runCleanup(
  c: Pick<CommandContext, "modes" | "exec" | "log" | "interfaceAddresses">,
): Promise<number> {
  const ok = await cleanupModes(c.modes.values(), c.exec, c.log, { interfaceIPs: c.interfaceAddresses() });
  c.log.info("Cleanup done", { ok });
  return ok ? 0 : 1;
}
