import type { ExecOptions, ExecResult, Executor } from "../../iptables/executor.ts";
import { assertEquals, assertMatch, assertRejects } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { ModeUnavailableError } from "../runtime/errors.ts";
import { newModeDeps } from "../mode_definition.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";
import { FakeClock } from "../runtime/clock.ts";
import { nftablesMode } from "./mode.ts";

/** An executor whose nft reports `version`, or that has no nft at all. */
function host(version: string | undefined): Executor {
  return {
    run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
      if (version === undefined) return Promise.reject(new Error(`${cmd}: cannot start`));
      if (opts.args[0] === "--version") {
        return Promise.resolve({ code: 0, stdout: `nftables ${version}\n`, stderr: "" });
      }
      return Promise.resolve({ code: 0, stdout: "", stderr: "" });
    },
  };
}

const deps = (exec: Executor) =>
  newModeDeps(defaultConfig(), { nodeName: "node-a", log: new MemoryLogger(), clock: new FakeClock(), exec });

Deno.test({
  name: "nftables mode refuses clearly without nft or with an nft older than the layout needs",
  ignore: Deno.uid() !== 0,
  async fn() {
    const missing = await assertRejects(
      () => nftablesMode.create(deps(host(undefined))),
      ModeUnavailableError,
    );
    assertMatch(missing.message, /needs the nft tool .*try --proxy-mode=iptables/);
    const old = await assertRejects(
      () => nftablesMode.create(deps(host("v0.9.8 (E.D.S.)"))),
      ModeUnavailableError,
    );
    assertMatch(old.message, /needs nft 1\.0\.1 or newer; found "nftables v0\.9\.8 \(E\.D\.S\.\)"/);
  },
});

/**
 * An executor whose nft 1.0.6 checks every script after a timer, rejecting those `rejects` names;
 * `most` is the most checks that ran at once.
 */
function checking(rejects: (script: string) => boolean) {
  let running = 0;
  const seen = { most: 0 };
  const exec: Executor = {
    async run(_cmd: string, opts: ExecOptions): Promise<ExecResult> {
      if (opts.args[0] === "--version") {
        return { code: 0, stdout: "nftables v1.0.6 (Lester Gooch #5)\n", stderr: "" };
      }
      if (opts.args[0] !== "-c") return { code: 0, stdout: "", stderr: "" };
      running++;
      seen.most = Math.max(seen.most, running);
      await new Promise((r) => setTimeout(r, 5));
      running--;
      const script = String(opts.stdin);
      return rejects(script)
        ? { code: 1, stdout: "", stderr: "Error: Could not process rule: Operation not supported\n" }
        : { code: 0, stdout: "", stderr: "" };
    },
  };
  return { exec, seen };
}

Deno.test({
  name: "nftables mode checks both families' layouts at once; IPv6 without affinity is said at debug level",
  ignore: Deno.uid() !== 0,
  async fn() {
    const { exec, seen } = checking((s) => s.includes("table ip6") && s.includes("affinity-10800"));
    const d = deps(exec);
    const provider = await nftablesMode.create(d);
    try {
      assertEquals(seen.most, 2);
      assertEquals(provider.explain.views().map((v) => v.family), ["IPv4", "IPv6"]);
      const log = d.log as MemoryLogger;
      assertEquals(
        log.records.filter((r) => r.msg.startsWith("This nft cannot program ClientIP affinity")).map((r) => [
          r.level,
          r.fields?.family,
        ]),
        [["debug", "IPv6"]],
      );
    } finally {
      provider.close();
    }
  },
});

Deno.test({
  name:
    "nftables mode serves IPv4 alone, with a warning, when nft rejects the IPv6 layout, and refuses when it rejects the IPv4 one",
  ignore: Deno.uid() !== 0,
  async fn() {
    const d = deps(checking((s) => s.includes("table ip6")).exec);
    const provider = await nftablesMode.create(d);
    try {
      assertEquals(provider.explain.views().map((v) => v.family), ["IPv4"]);
      assertEquals((d.log as MemoryLogger).messages("warn"), [
        "IPv6 nftables layout rejected; serving IPv4 only",
      ]);
    } finally {
      provider.close();
    }
    const refused = await assertRejects(
      () => nftablesMode.create(deps(checking((s) => s.includes("table ip ")).exec)),
      ModeUnavailableError,
    );
    assertMatch(
      refused.message,
      /this kernel or nft rejects the layout: .*Operation not supported.*try --proxy-mode=iptables/,
    );
  },
});
