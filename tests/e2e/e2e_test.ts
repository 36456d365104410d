/**
 * End to end, real kernel: for every mode, one node namespace runs the real program (started as
 * `deno task start` starts it) on a file source holding every applicable scenario's objects; pods
 * on veth pairs, client hosts and a second node on the node's external link. Then each scenario of
 * `scenarios.ts` runs as a step. Everything lives in namespaces this test creates and removes.
 */
import { type ProxyProcess, realKernel, Topology } from "./netns.ts";
import { type E2EEnv, SCENARIOS } from "./scenarios.ts";

/**
 * Per mode: the flags that differ (every run adds the source, node name and server addresses) and
 * the tools its scenarios need (conntrack: the stale-UDP scenario; sysctl: NodePorts on 127.0.0.1).
 */
const MODES: ReadonlyArray<{ mode: string; args: string[]; tools: string[] }> = [
  {
    mode: "iptables",
    args: ["--cluster-cidr=10.180.0.0/16", "--iptables-min-sync-period=100ms"],
    tools: ["iptables-restore", "iptables-save", "conntrack", "sysctl"],
  },
  {
    mode: "nftables",
    args: ["--cluster-cidr=10.180.0.0/16", "--iptables-min-sync-period=100ms"],
    tools: ["nft", "conntrack"],
  },
  {
    mode: "userspace",
    args: ["--proxy-port-range=40000-40100", "--iptables-min-sync-period=100ms"],
    tools: ["iptables-restore", "iptables-save"],
  },
];

for (const { mode, args, tools } of MODES) {
  const { ignore, note } = await realKernel(tools);
  Deno.test({
    name: `e2e ${mode}: the real program in a network namespace sends real packets where they belong${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(ctx) {
      const scenarios = SCENARIOS.filter((s) => s.notFor?.[mode] === undefined);
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
          const reason = s.notFor?.[mode];
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
