/**
 * The proxy's second phase (upstream's `platformSetup` and `createProxier`): the privileged set-up
 * (conntrack sysctls, then the mode's own set-up, each tried again when a tool ran and failed), and
 * the mode's provider. From here on the node is touched.
 * @module
 */
import { SysctlRunner } from "../../../iptables/sysctl.ts";
import { tuneConntrack } from "../../conntrack/sysctls.ts";
import type { ModeProvider } from "../../mode_definition.ts";
import { ModeUnavailableError } from "../../runtime/errors.ts";
import { retryStart } from "../../runtime/start_retry.ts";
import type { ProxyServer } from "./build.ts";
import { proxyFailure } from "./proxy_failure.ts";

/**
 * Tunes conntrack and runs the mode's set-up.
 * @throws {CommandFailure} when the mode cannot run on this node (what is missing, and what to do).
 */
export async function platformSetup(s: ProxyServer): Promise<void> {
  const { config, mode, exec, log } = s.c;
  await tuneConntrack(config.conntrack, {
    sysctl: new SysctlRunner({ exec }),
    cpus: navigator.hardwareConcurrency,
    log,
    warn: s.warnNode,
  });
  await modeStep(s, () => mode.setup?.(s.deps) ?? Promise.resolve());
}

/**
 * Returns the mode's provider (its proxiers, one per family).
 * @throws {CommandFailure} when the mode cannot run on this node.
 */
export function createProvider(s: ProxyServer): Promise<ModeProvider> {
  return modeStep(s, () => s.c.mode.create(s.deps));
}

/** Runs a step of the mode's start, tried again as `retryStart` says; a mode that cannot run fails the start. */
async function modeStep<T>(s: ProxyServer, step: () => Promise<T>): Promise<T> {
  try {
    return await retryStart(s.c.config.mode, step, { log: s.c.log, clock: s.clock });
  } catch (e) {
    if (!(e instanceof ModeUnavailableError)) throw e;
    throw proxyFailure(e.message, undefined, e);
  }
}
