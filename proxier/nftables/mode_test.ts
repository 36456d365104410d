import type { ExecOptions, ExecResult, Executor } from "../../iptables/executor.ts";
import { assertEquals, assertMatch, assertRejects } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { ModeUnavailableError } from "../runtime/errors.ts";
import { newModeDeps } from "../mode_definition.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";
import { FakeClock } from "../runtime/clock.ts";
import { abortsOnIPv6Affinity, nftablesMode, probeScript } from "./mode.ts";
import { NftRunner } from "../../iptables/nft.ts";
import { realKernel, withNamespace } from "../../tests/support/namespace.ts";

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
 * An executor whose nft (1.0.6 unless `version` says otherwise) checks every script after a timer,
 * rejecting those `rejects` names; `most` is the most checks that ran at once, `scripts` those checked.
 */
function checking(rejects: (script: string) => boolean, version = "v1.0.6 (Lester Gooch #5)") {
  let running = 0;
  const seen = { most: 0, scripts: [] as string[] };
  const exec: Executor = {
    async run(_cmd: string, opts: ExecOptions): Promise<ExecResult> {
      if (opts.args[0] === "--version") {
        return { code: 0, stdout: `nftables ${version}\n`, stderr: "" };
      }
      if (opts.args[0] !== "-c") return { code: 0, stdout: "", stderr: "" };
      seen.scripts.push(String(opts.stdin));
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

/** Whether `script` is the IPv6 layout with the affinity maps. */
const ipv6Affinity = (script: string) => script.includes("table ip6") && script.includes("affinity-10800");

Deno.test({
  name: "nftables mode never asks an nft known to abort on the IPv6 affinity rule; any other nft is asked",
  ignore: Deno.uid() !== 0,
  async fn() {
    // 1.0.6 as it really is: the check with IPv6 affinity would abort (exit 134).
    const old = checking(ipv6Affinity);
    const d = deps(old.exec);
    const provider = await nftablesMode.create(d);
    try {
      assertEquals(old.seen.scripts.filter(ipv6Affinity).length, 0);
      assertEquals(provider.explain.views().map((v) => v.family), ["IPv4", "IPv6"]);
      const said = (d.log as MemoryLogger).records.filter((r) =>
        r.msg.startsWith("This nft cannot program ClientIP affinity")
      );
      assertEquals(said.map((r) => [r.fields?.family, r.fields?.error]), [[
        "IPv6",
        "nftables v1.0.6 (Lester Gooch #5) is known to abort on the IPv6 affinity map's update rule",
      ]]);
    } finally {
      provider.close();
    }
    const newer = checking(() => false, "v1.1.3 (Commodore Bullmoose #4)");
    const d2 = deps(newer.exec);
    const provider2 = await nftablesMode.create(d2);
    try {
      assertEquals(newer.seen.scripts.filter(ipv6Affinity).length, 1);
      assertEquals((d2.log as MemoryLogger).records.filter((r) => r.msg.startsWith("This nft cannot")), []);
    } finally {
      provider2.close();
    }
  },
});

const kernel = await realKernel(["nft"]);

Deno.test({
  name:
    `nftables mode's list of nft versions aborting on the IPv6 affinity rule holds for this machine's nft${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    await withNamespace(async (exec) => {
      const version = await new NftRunner({ exec, family: "IPv6" }).version();
      const check = async (family: "IPv4" | "IPv6", affinity: boolean) => {
        const r = await exec.run("nft", { args: ["-c", "-f", "-"], stdin: probeScript(family, affinity) });
        return { code: r.code, aborted: r.code === 134 && /Assertion/.test(r.stderr) };
      };
      const listed = abortsOnIPv6Affinity(version);
      // Listed: it aborts (the start must not ask it); not listed: it does not (else it belongs there).
      assertEquals((await check("IPv6", true)).aborted, listed, version.text);
      assertEquals(await check("IPv6", false), { code: 0, aborted: false });
      assertEquals(await check("IPv4", true), { code: 0, aborted: false });
    });
  },
});
