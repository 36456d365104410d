/**
 * `--cleanup` credits what it removes to the mode that wrote it, on a real kernel in namespaces this
 * test creates: after a run of one mode (each mode runnable here), it names that mode alone and no
 * leftover, and the node holds none of the program's rules after. The program runs as
 * `deno task start` does.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { CONVERGE_MS } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import { nodePortObjects } from "../support/node_port_objects.ts";
import { Topology } from "./netns.ts";

const OBJECTS = nodePortObjects();

const kernel = await realKernel(["nft", "iptables-nft-save", "ip6tables-nft-save"]);

for (const mode of ["iptables", "nftables", "userspace"] as const) {
  Deno.test({
    name: `e2e --cleanup after a ${mode}-mode run names the ${mode} mode alone${kernel.note}`,
    ignore: kernel.ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const t = new Topology();
      const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-cleanup-" });
      try {
        await t.init();
        await Deno.writeTextFile(`${dir}/objects.yaml`, OBJECTS);
        const p = t.startProxy([
          `--proxy-mode=${mode}`,
          `--source=file:${dir}/objects.yaml`,
          "--hostname-override=node-a",
        ]);
        await eventually(() => assertMatch(p.log(), /First sync in the kernel/), CONVERGE_MS);
        assertEquals((await p.stop("SIGTERM")).code, 0);
        const r = await t.runProgram(["--cleanup"]);
        assertEquals(r.code, 0, r.stderr);
        const said = [...r.stderr.matchAll(/"(Removed [^"]+)"/g)].map((m) => m[1]);
        assertEquals(said, [`Removed the ${mode} mode's rules`], r.stderr);
        const left = [
          await t.exec(t.node, ["nft", "list", "ruleset"], { allowFail: true }),
          await t.exec(t.node, ["iptables-nft-save"], { allowFail: true }),
          await t.exec(t.node, ["ip6tables-nft-save"], { allowFail: true }),
        ].join("\n");
        assert(!/KUBE-|kube-proxy/.test(left.replace(/^#.*$/gm, "")), left);
      } finally {
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
