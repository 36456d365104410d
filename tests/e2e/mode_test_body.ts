/**
 * One mode's end-to-end test, shared by the host's modes (e2e_test.ts) and the ipvs mode, which
 * runs it inside the VM (tests/vm/guest).
 * @module
 */
import { Topology } from "./netns.ts";
import type { ProxyProcess } from "../support/program.ts";
import { realKernel } from "../support/namespace.ts";
import { type E2EEnv, SCENARIOS } from "./scenarios.ts";

/**
 * Registers the end-to-end test of `mode`: every applicable scenario of `scenarios.ts` as a step,
 * the real program (as `deno task start` starts it) with `args` on a file source, in namespaces
 * this test creates. Skipped, saying why, without root or one of `tools`.
 */
export async function e2eTest(
  mode: string,
  args: readonly string[],
  tools: readonly string[],
): Promise<void> {
  const { ignore, note } = await realKernel(tools);
  Deno.test({
    name: `e2e ${mode}: the real program in a network namespace sends real packets where they belong${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(ctx) {
      const scenarios = SCENARIOS.filter((s) => s.excludedIn?.[mode] === undefined);
      const t = new Topology();
      const dir = await Deno.makeTempDir({ prefix: `kpd-e2e-${mode}-` });
      const proxies: Array<{ node: string; p: ProxyProcess }> = [];
      let failed = false;
      try {
        await t.init();
        const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
        const admitted = await t.addClient(); // 192.168.0.10
        const refused = await t.addClient(); // 192.168.0.11
        const node2 = scenarios.some((s) => s.secondNode) ? await t.addSecondNode() : undefined;
        const write = (id: string, yaml: string) => Deno.writeTextFile(`${dir}/${id}.yaml`, yaml);
        const proxyArgs = (node: string) => [
          `--proxy-mode=${mode}`,
          `--source=file:${dir}`,
          `--hostname-override=${node}`,
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
          ...args,
        ];
        const env: E2EEnv = {
          mode,
          t,
          pods,
          admitted,
          refused,
          node2,
          node: t.nodeAgent,
          write,
          stopProxy: async () => ({ code: (await proxies[0].p.stop()).code }),
          runProgram: (a) => t.runProgram(a),
        };
        for (const s of scenarios) await write(s.id, s.objects(env));
        proxies.push({ node: "node-a", p: t.startProxy(proxyArgs("node-a")) });
        if (node2 !== undefined) {
          proxies.push({ node: "node-b", p: t.startProxy(proxyArgs("node-b"), node2.ns) });
        }
        for (const s of SCENARIOS) {
          const reason = s.excludedIn?.[mode];
          const passed = await ctx.step({
            name: reason === undefined ? s.name : `${s.name} (not for ${mode}: ${reason})`,
            ignore: reason !== undefined,
            fn: () => s.check(env),
          });
          if (!passed && reason === undefined) failed = true;
        }
      } catch (e) {
        failed = true;
        throw e;
      } finally {
        // Stop first: the log is complete only once the process has exited.
        for (const { p } of proxies) await p.stop();
        if (failed) {
          for (const { node, p } of proxies) console.error(`--- ${mode} proxy ${node} log ---\n${p.log()}`);
        }
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
