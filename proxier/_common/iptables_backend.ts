/**
 * Which iptables backend (nf_tables or legacy) the modes that write iptables rules use, probed once
 * at start as upstream's images decide, and cleanups that reach every backend a run may have used.
 * @module
 */
import { ExecError, type Executor } from "../../iptables/executor.ts";
import { type IptablesBackendName, IptablesRunner } from "../../iptables/iptables.ts";
import type { Logger } from "../runtime/logger.ts";
import type { IptablesBackend } from "../options/config.ts";
import type { IPFamily } from "../model/types.ts";

/** Chains kubelet (1.17+) creates in mangle: where they are is the backend the host uses. */
const KUBELET_HINT = /^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY) /m;

/** Where the backend choice came from, for the log. */
export interface BackendChoice {
  /** Undefined: neither `iptables-nft` nor `iptables-legacy` exists; plain `iptables` is used. */
  readonly backend: IptablesBackendName | undefined;
  readonly reason: string;
}

/**
 * Returns the iptables backend to use. `auto` decides as upstream's images (iptables-wrapper):
 * the backend holding kubelet's mangle chains; else the one holding more rules (legacy only when
 * strictly more); nft when neither holds any. Runs only `*-save` tools.
 */
export async function chooseIptablesBackend(
  exec: Executor,
  requested: IptablesBackend,
): Promise<BackendChoice> {
  if (requested !== "auto") return { backend: requested, reason: "--iptables-backend" };
  const save = async (backend: IptablesBackendName): Promise<string | undefined> => {
    let out: string | undefined;
    for (const family of ["IPv4", "IPv6"] as const) {
      const cmd = `${new IptablesRunner({ exec, family, backend }).command}-save`;
      try {
        const r = await exec.run(cmd, { args: [] });
        if (r.code === 0) out = (out ?? "") + r.stdout;
      } catch { /* not installed */ }
    }
    return out;
  };
  // Whole saves, never `-t mangle`: naming a table to the legacy backend creates it, and the probe
  // must leave a backend the node does not use as it found it.
  const nftAll = await save("nft");
  const legacyAll = await save("legacy");
  if (nftAll === undefined && legacyAll === undefined) {
    return { backend: undefined, reason: "no iptables-nft or iptables-legacy; using iptables" };
  }
  if (nftAll !== undefined && KUBELET_HINT.test(nftAll)) {
    return { backend: "nft", reason: "kubelet's chains are in nf_tables" };
  }
  if (legacyAll !== undefined && KUBELET_HINT.test(legacyAll)) {
    return { backend: "legacy", reason: "kubelet's chains are in legacy iptables" };
  }
  const rules = (text: string | undefined) => text?.split("\n").filter((l) => l.startsWith("-")).length ?? -1;
  const legacy = rules(legacyAll);
  const nft = rules(nftAll);
  if (legacy > nft) {
    return { backend: "legacy", reason: `legacy iptables holds more rules (${legacy} > ${nft})` };
  }
  if (nftAll === undefined) return { backend: "legacy", reason: "no iptables-nft" };
  return {
    backend: "nft",
    reason: `nf_tables holds as many rules or more (${nft} >= ${Math.max(legacy, 0)})`,
  };
}

/**
 * Returns an iptables runner for `family` (on `backend`) when we are root and its save tool works
 * (logging the version, which names the backend), else undefined (logging why).
 */
export async function probeIptables(
  exec: Executor,
  log: Logger,
  family: IPFamily,
  backend?: IptablesBackendName,
): Promise<IptablesRunner | undefined> {
  if (Deno.uid() !== 0) return undefined;
  const ipt = new IptablesRunner({ exec, family, backend });
  try {
    const [version] = await Promise.all([ipt.version(), ipt.save("nat")]);
    log.info("Using iptables", { family, version, command: ipt.command });
    return ipt;
  } catch (e) {
    log.warn("iptables is not usable", { family, command: ipt.command, error: (e as Error).message });
    return undefined;
  }
}

/** Chooses the iptables backend (see {@linkcode chooseIptablesBackend}) and logs the choice and why. */
export async function probeIptablesBackend(
  exec: Executor,
  log: Logger,
  requested: IptablesBackend,
): Promise<IptablesBackendName | undefined> {
  if (Deno.uid() !== 0) return undefined;
  const choice = await chooseIptablesBackend(exec, requested);
  log.info("Using iptables backend", { backend: choice.backend ?? "iptables", reason: choice.reason });
  return choice.backend;
}

/**
 * Runs `fn` on a runner of each installed backend (`-nft`, `-legacy`), or on plain `iptables`
 * when neither is: for cleanups, since rules a run on either backend left act on packets.
 */
export async function onEveryIptablesBackend<T>(
  exec: Executor,
  family: IPFamily,
  fn: (ipt: IptablesRunner) => Promise<T>,
): Promise<T[]> {
  const out: T[] = [];
  for (const backend of ["nft", "legacy"] as const) {
    try {
      out.push(await fn(new IptablesRunner({ exec, family, backend })));
    } catch (e) {
      if (!(e instanceof ExecError && e.code === -1)) throw e;
    }
  }
  if (out.length === 0) out.push(await fn(new IptablesRunner({ exec, family })));
  return out;
}
