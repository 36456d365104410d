import type { ExecOptions, ExecResult, Executor } from "../../iptables/executor.ts";
import { assertMatch, assertRejects } from "../../tests/support/assert.ts";
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
