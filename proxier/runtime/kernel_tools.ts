/**
 * Which kernel tools work on this node, probed once at start by the modes that need them.
 * @module
 */
import { ExecError, type Executor } from "../../iptables/executor.ts";
import { type IptablesBackendName, IptablesRunner } from "../../iptables/iptables.ts";
import type { Logger } from "./logger.ts";
import type { IptablesBackend, ProxyConfig } from "../options/config.ts";
import type { IPFamily } from "../types.ts";

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
  const save = async (backend: IptablesBackendName, table?: string): Promise<string | undefined> => {
    let out: string | undefined;
    for (const family of ["IPv4", "IPv6"] as const) {
      const cmd = `${new IptablesRunner({ exec, family, backend }).command}-save`;
      try {
        const r = await exec.run(cmd, { args: table === undefined ? [] : ["-t", table] });
        if (r.code === 0) out = (out ?? "") + r.stdout;
      } catch { /* not installed */ }
    }
    return out;
  };
  const nftMangle = await save("nft", "mangle");
  const legacyMangle = await save("legacy", "mangle");
  if (nftMangle === undefined && legacyMangle === undefined) {
    return { backend: undefined, reason: "no iptables-nft or iptables-legacy; using iptables" };
  }
  if (nftMangle !== undefined && KUBELET_HINT.test(nftMangle)) {
    return { backend: "nft", reason: "kubelet's chains are in nf_tables" };
  }
  if (legacyMangle !== undefined && KUBELET_HINT.test(legacyMangle)) {
    return { backend: "legacy", reason: "kubelet's chains are in legacy iptables" };
  }
  const rules = (text: string | undefined) => text?.split("\n").filter((l) => l.startsWith("-")).length ?? -1;
  const legacy = rules(legacyMangle === undefined ? undefined : await save("legacy"));
  const nft = rules(nftMangle === undefined ? undefined : await save("nft"));
  if (legacy > nft) {
    return { backend: "legacy", reason: `legacy iptables holds more rules (${legacy} > ${nft})` };
  }
  if (nftMangle === undefined) return { backend: "legacy", reason: "no iptables-nft" };
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
export async function onEveryIptablesBackend(
  exec: Executor,
  family: IPFamily,
  fn: (ipt: IptablesRunner) => Promise<void>,
): Promise<void> {
  let ran = false;
  for (const backend of ["nft", "legacy"] as const) {
    try {
      await fn(new IptablesRunner({ exec, family, backend }));
      ran = true;
    } catch (e) {
      if (!(e instanceof ExecError && e.code === -1)) throw e;
    }
  }
  if (!ran) await fn(new IptablesRunner({ exec, family }));
}

/** A kernel tool a mode runs, and what stops working without it. */
export interface ToolNeed {
  readonly tool: string;
  /** True: the mode cannot run without it. */
  readonly required: boolean;
  /** What an operator loses without it (for optional tools), or what it does (required ones). */
  readonly without: string;
  /** Set: only needed when this holds for the configuration (e.g. portals enabled). */
  readonly when?: (config: ProxyConfig) => boolean;
}

/** The tool most modes share: stale UDP flows are cleared through it. */
export const CONNTRACK_NEED: ToolNeed = {
  tool: "conntrack",
  required: false,
  without: "stale UDP conntrack entries are not cleared: UDP clients keep reaching removed endpoints " +
    "(and REJECTed services) until their flows time out (Debian/Ubuntu package conntrack)",
};

/** Tools the program runs in every mode for its process-wide set-up (upstream's platformSetup). */
export const PROCESS_TOOLS: readonly ToolNeed[] = [
  {
    tool: "sysctl",
    required: false,
    without:
      "the conntrack settings (--conntrack-*, conntrack:) cannot be made (Debian/Ubuntu package procps)",
    when: (c) => {
      const t = c.conntrack;
      return [t.tcpEstablishedTimeoutMs, t.tcpCloseWaitTimeoutMs, t.udpTimeoutMs, t.udpStreamTimeoutMs]
        .some((ms) => (ms ?? 0) > 0) || t.tcpBeLiberal || (t.maxPerCore ?? 0) > 0;
    },
  },
  {
    tool: "choom",
    required: false,
    without: "--oom-score-adj cannot be applied (Debian/Ubuntu package util-linux)",
    when: (c) => c.oomScoreAdj !== null,
  },
];

/** Returns true when an executable file `name` is in one of `path`'s directories. */
export async function onPath(name: string, path: string | undefined): Promise<boolean> {
  for (const dir of (path ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
    if (dir === "") continue;
    try {
      const info = await Deno.stat(`${dir}/${name}`);
      if (info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0) return true;
    } catch { /* not here */ }
  }
  return false;
}

/**
 * Returns the tools of `needs` that apply to `config` and that `found` does not find, each once,
 * logging one line per missing optional tool saying what stops working. Required ones are for
 * the caller to report (the mode cannot start).
 */
export async function checkTools(
  needs: readonly ToolNeed[],
  config: ProxyConfig,
  found: (tool: string) => Promise<boolean>,
  log: Logger,
): Promise<ToolNeed[]> {
  const missing: ToolNeed[] = [];
  for (const n of needs) {
    if (n.when !== undefined && !n.when(config)) continue;
    if (missing.some((m) => m.tool === n.tool) || await found(n.tool)) continue;
    missing.push(n);
    if (!n.required) log.warn(`${n.tool} is not installed: ${n.without}`, { tool: n.tool });
  }
  return missing;
}

/**
 * Checks the tools `mode` runs (and the process's own) on `PATH`: a missing optional one is one
 * warning saying what stops working; a missing required one is one error naming each. Returns
 * false when a required one is missing (the mode cannot run).
 */
export async function modeToolsPresent(
  mode: { readonly name: string; readonly tools: readonly ToolNeed[] },
  config: ProxyConfig,
  path: string | undefined,
  log: Logger,
): Promise<boolean> {
  const missing = await checkTools([...PROCESS_TOOLS, ...mode.tools], config, (t) => onPath(t, path), log);
  const required = missing.filter((m) => m.required);
  if (required.length === 0) return true;
  log.error(`${mode.name} mode cannot run: ${required.map((m) => m.tool).join(", ")} not found on PATH`, {
    tools: required.map((m) => `${m.tool}: ${m.without}`),
  });
  return false;
}
