/**
 * A start takes over only what it serves, on a real kernel in namespaces this test creates: the
 * userspace mode started on a node the nftables mode programmed, with one NodePort held by another
 * program, stays not ready (`/readyz` 503 naming the port) and leaves the nftables rules in place;
 * once the port is free it serves it, becomes ready, and only then removes them. The program runs
 * as `deno task start` does.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { CONVERGE_MS } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import { nodePortObjects } from "../support/node_port_objects.ts";
import { Topology } from "./netns.ts";

const kernel = await realKernel(["nft", "curl", "iptables-nft-save"]);

const objects = (held: number) => nodePortObjects("held", held);

Deno.test({
  name:
    `e2e take-over: a userspace start with a NodePort held elsewhere stays not ready and keeps the nftables rules until it serves it${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-takeover-" });
    let holder: Deno.ChildProcess | undefined;
    try {
      await t.init();
      const port = 30080;
      await Deno.writeTextFile(`${dir}/objects.yaml`, objects(port));
      const source = `--source=file:${dir}/objects.yaml`;
      const nft = t.startProxy(["--proxy-mode=nftables", source, "--hostname-override=node-a"]);
      await eventually(() => assertMatch(nft.log(), /First sync in the kernel/), CONVERGE_MS);
      assertEquals((await nft.stop("SIGTERM")).code, 0);
      const table = () => t.exec(t.node, ["nft", "list", "table", "ip", "kube-proxy"], { allowFail: true });
      assertMatch(await table(), /service-ips/, "the nftables mode's rules stay after it stops");
      // Another program holds the NodePort on every address of the node.
      holder = new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          t.node,
          Deno.execPath(),
          "eval",
          `Deno.listen({ port: ${port} }); console.log("held"); setInterval(() => {}, 1 << 30);`,
        ],
        stdout: "piped",
      }).spawn();
      const reader = holder.stdout.pipeThrough(new TextDecoderStream()).getReader();
      assertEquals((await reader.read()).value?.trim(), "held");
      const us = t.startProxy(["--proxy-mode=userspace", source, "--hostname-override=node-a"]);
      await eventually(() => assertMatch(us.log(), /First sync in the kernel/), CONVERGE_MS);
      const readyz = async () => {
        const out = await t.exec(t.node, [
          "curl",
          "-s",
          "-w",
          "\n%{http_code}",
          "http://127.0.0.1:10256/readyz",
        ], {
          allowFail: true,
        });
        const [body, code] = [out.slice(0, out.lastIndexOf("\n")), out.slice(out.lastIndexOf("\n") + 1)];
        return { code, body };
      };
      const r = await readyz();
      assertEquals(r.code, "503", r.body);
      assertMatch(r.body, /"unserved-IPv4":"1 Service port not served: e2e\/held:p\/TCP/);
      // Still programmed: the userspace mode serves nothing of this port yet, the nftables rules still do.
      await new Promise((res) => setTimeout(res, 2000));
      assertMatch(await table(), /service-ips/, "nothing the new start cannot serve is taken away");
      assert(!/Removed the nftables mode's rules/.test(us.log()), us.log());
      // The port freed: served, ready, and only then the nftables rules go.
      holder.kill("SIGKILL");
      await holder.status;
      holder = undefined;
      await eventually(async () => assertEquals((await readyz()).code, "200"), CONVERGE_MS);
      await eventually(async () => assertEquals(await table(), ""), CONVERGE_MS);
      await eventually(() => assertMatch(us.log(), /Removed the nftables mode's rules/), CONVERGE_MS);
    } finally {
      if (holder !== undefined) {
        holder.kill("SIGKILL");
        await holder.status;
      }
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
