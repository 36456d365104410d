/**
 * What `--cleanup` does, and what a start does to other modes' leftovers: every mode's (and upstream
 * kube-proxy's same mode's) kernel objects removed in both families, each mode through its own
 * `cleanup` (`proxier/<mode>/cleanup.ts`), in registry order.
 * @module
 */
import { ExecError, type Executor } from "../../../iptables/executor.ts";
import { type CommandContext, EXIT, type ExitCode } from "../../command_definition.ts";
import type { ProxyModeDefinition } from "../../mode_definition.ts";
import type { Logger } from "../../runtime/logger.ts";
import { askHolder, describeIdentity } from "./node_lock.ts";

/**
 * Removes the kernel objects of every mode in `modes` but `keep` (all of them with `--cleanup`), in
 * both families, and says what went, one line per mode that had something. Each mode first removes
 * what its own chains show it wrote (names modes share, KUBE-SERVICES, KUBE-MARK-MASQ..., go with
 * the mode whose own chains are beside them); with `--cleanup` every mode then removes what is left
 * of its names, said apart as leftovers whose mode cannot be told, never credited to a mode that
 * did not run. With `keep` (a start) the names modes share stay for a mode that runs, and a mode
 * in `draining` keeps its datapath. A tool that is not installed has nothing to clean; any other
 * failure is logged and the rest still runs. Returns whether everything succeeded and whether
 * anything was removed.
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
): Promise<{ readonly ok: boolean; readonly removed: boolean }> {
  const { keep, draining = new Set() } = o;
  let ok = true;
  const all = [...modes].filter((m) => m !== keep);
  /** What went, per mode (undefined: leftovers whose mode cannot be told), per family. */
  const removed = new Map<ProxyModeDefinition | undefined, string[]>();
  const passes = keep === undefined ? [false, true] : [false];
  for (const family of ["IPv4", "IPv6"] as const) {
    for (const everything of passes) {
      for (const mode of all) {
        try {
          const gone = await mode.cleanup(exec, family, {
            everything,
            keepDatapath: draining.has(mode),
            interfaceIPs: o.interfaceIPs,
          });
          const owner = everything ? undefined : mode;
          if (gone.length > 0) {
            removed.set(owner, [...removed.get(owner) ?? [], `${family}: ${gone.join(", ")}`]);
          }
        } catch (e) {
          if (e instanceof ExecError && e.code === -1) continue; // the tool is not installed
          ok = false;
          log.error("Cleanup failed", { mode: mode.name, family, error: (e as Error).message });
        }
      }
    }
  }
  for (const [mode, what] of removed) {
    if (mode !== undefined) {
      log.info(`Removed the ${mode.name} mode's rules`, { mode: mode.name, removed: what.join("; ") });
    }
  }
  const leftovers = removed.get(undefined);
  if (leftovers !== undefined) {
    log.info("Removed leftovers whose mode cannot be told (names more than one mode uses)", {
      removed: leftovers.join("; "),
    });
  }
  return { ok, removed: removed.size > 0 };
}

/**
 * `--cleanup`: every mode's kernel objects, in both families; returns the exit code (failed: some
 * removal failed, each logged).
 */
export async function runCleanup(
  c: Pick<CommandContext, "modes" | "exec" | "log" | "interfaceAddresses">,
): Promise<ExitCode> {
  const running = await askHolder();
  if (running !== undefined) {
    c.log.warn("A kube-proxy-deno runs on this node: its next sync writes its rules again; stop it first", {
      running: describeIdentity(running),
    });
  }
  const { ok, removed } = await cleanupModes(c.modes.values(), c.exec, c.log, {
    interfaceIPs: c.interfaceAddresses(),
  });
  if (!removed && ok) c.log.info("Nothing to remove: no mode's rules on this node");
  c.log.info("Cleanup done", { ok });
  return ok ? EXIT.ok : EXIT.failed;
}
