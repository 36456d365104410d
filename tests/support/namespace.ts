/**
 * Network namespaces and the kernel for tests: a scratch namespace removed even when the test
 * fails, an executor inside it, whether real-kernel tests can run here (and why not), the xtables
 * lock held by another process. Nothing here touches the host's own interfaces or rules.
 * @module
 */
import { onPath } from "../../proxier/runtime/kernel_tools.ts";
import { DenoExecutor, type ExecOptions, type ExecResult, type Executor } from "../../iptables/executor.ts";
import { NftRunner } from "../../iptables/nft.ts";
import {
  ProcessSession,
  type SessionExecutor,
  type SessionOptions,
  type ToolSession,
} from "../../iptables/tool_session.ts";

/** Runs a command; throws with its stderr when it fails. */
export async function sh(cmd: string, args: string[], opts: { allowFail?: boolean } = {}): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (out.code !== 0 && !opts.allowFail) {
    throw new Error(`${cmd} ${args.join(" ")} exited ${out.code}: ${dec.decode(out.stderr)}`);
  }
  return dec.decode(out.stdout);
}

/** Runs every command inside network namespace `ns` (`ip netns exec ns cmd ...`). */
export class NetnsExecutor implements Executor {
  readonly #inner = new DenoExecutor();
  /** @param ns an existing namespace. */
  constructor(readonly ns: string) {}
  /** @inheritdoc */
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    return this.#inner.run("ip", { ...opts, args: ["netns", "exec", this.ns, cmd, ...opts.args] });
  }
}

/** {@linkcode NetnsExecutor} that keeps tools running too (`nft -i`), inside the namespace. */
export class NetnsSessionExecutor extends NetnsExecutor implements SessionExecutor {
  /** Every session started, to be closed by the test. */
  readonly sessions: ToolSession[] = [];
  /** The arguments of every run reading a file of statements (`-f`): what no session took. */
  readonly fileRuns: string[][] = [];
  /** @inheritdoc */
  override run(cmd: string, o: ExecOptions): Promise<ExecResult> {
    if (o.args.includes("-f")) this.fileRuns.push([...o.args]);
    return super.run(cmd, o);
  }
  /** @inheritdoc */
  start(cmd: string, o: SessionOptions): ToolSession {
    const s = new ProcessSession("ip", { ...o, args: ["netns", "exec", this.ns, cmd, ...o.args] });
    this.sessions.push(s);
    return s;
  }
}

/**
 * Runs `fn` in a fresh network namespace ({@linkcode withNamespace}) with an executor that keeps
 * sessions there and an IPv4 {@linkcode NftRunner} on it, whose nft kept running is closed after.
 */
export function withNftRunner<T>(fn: (exec: NetnsSessionExecutor, nft: NftRunner) => Promise<T>): Promise<T> {
  return withNamespace(async (plain) => {
    const exec = new NetnsSessionExecutor(plain.ns);
    const nft = new NftRunner({ exec, family: "IPv4" });
    try {
      return await fn(exec, nft);
    } finally {
      await nft.close();
    }
  });
}

/**
 * Runs `fn` with a fresh network namespace (unique name, loopback up) and an executor inside it;
 * the namespace is deleted afterwards, even when `fn` throws.
 */
export async function withNamespace<T>(fn: (exec: NetnsExecutor) => Promise<T>): Promise<T> {
  const ns = `kpd-${crypto.randomUUID().slice(0, 8)}-scratch`;
  await sh("ip", ["netns", "add", ns]);
  try {
    await sh("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
    return await fn(new NetnsExecutor(ns));
  } finally {
    await sh("ip", ["netns", "del", ns], { allowFail: true });
  }
}

/**
 * Another process holding the xtables lock file `file` (iptables-legacy's; the tools under test
 * are pointed at it with `XTABLES_LOCKFILE`, so the host's `/run/xtables.lock` is never touched)
 * for `seconds`, or until killed. Resolves once the lock is held. One process (a shell that takes
 * the lock, then becomes `sleep`), so a kill releases it.
 */
export async function holdXtablesLock(file: string, seconds: number): Promise<Deno.ChildProcess> {
  const child = new Deno.Command("sh", {
    args: [
      "-c",
      'exec 9>"$1" && flock 9 && echo held && exec sleep "$2" >/dev/null',
      "sh",
      file,
      String(seconds),
    ],
    stdout: "piped",
  }).spawn();
  const said = await new Response(child.stdout).text();
  if (said.trim() !== "held") throw new Error(`could not take the xtables lock ${file}`);
  return child;
}

/** Returns true when `cmd` runs here (found on PATH). */
export async function commandWorks(cmd: string, args: string[] = ["--version"]): Promise<boolean> {
  try {
    await new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).output();
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether a real-kernel test can run here: root, network namespaces and every one of `tools` on
 * PATH. `note` is empty, or says why the test is skipped (put it in the test's name, so the
 * report shows it; CI installs every tool, so CI never skips).
 */
export async function realKernel(tools: readonly string[]): Promise<{ ignore: boolean; note: string }> {
  if (!await netnsAvailable()) return { ignore: true, note: " (skipped: needs root and network namespaces)" };
  const missing: string[] = [];
  for (const t of tools) if (!await onPath(t, Deno.env.get("PATH"))) missing.push(t);
  return missing.length === 0
    ? { ignore: false, note: "" }
    : { ignore: true, note: ` (skipped: ${missing.join(", ")} not installed)` };
}

/** Returns true when network namespaces can be created here (root with iproute2). */
export async function netnsAvailable(): Promise<boolean> {
  if (Deno.uid() !== 0) return false;
  const name = `kpdprobe${crypto.randomUUID().slice(0, 6)}`;
  try {
    await sh("ip", ["netns", "add", name]);
    await sh("ip", ["netns", "del", name]);
    return true;
  } catch {
    return false;
  }
}
