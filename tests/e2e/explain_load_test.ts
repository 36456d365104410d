/**
 * `explain` against a running proxy that holds a large table never hurts it: the report's rules are
 * read and traced in a worker, so `/healthz` keeps answering within 1 s while it runs, and SIGTERM in
 * the middle of one still ends the program within 2 s, on an idle machine: both bounds stretch with the
 * slowdown measured as the test starts, as a report would too if it ran on the main thread. The
 * table: nftables mode, 3,000 Services x 10 endpoints, 10 of them with Maglev (16,381 slots each).
 */
import { generate } from "../../bench/objects.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { pace } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import type { ProxyProcess } from "../support/program.ts";
import { Topology } from "./netns.ts";

const { ignore, note } = await realKernel(["nft"]);

const SERVICES = 3000;
const MAGLEV = 10;

Deno.test({
  name:
    `e2e explain under load: /healthz answers within 1 s throughout, SIGTERM mid-report ends the program within 2 s (idle machine)${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-explain-load-" });
    let proxy: ProxyProcess | undefined;
    const slow = pace();
    const healthzMs = 1000 * slow;
    const stopS = 2 * slow;
    try {
      await t.init();
      const { services, slices } = generate(SERVICES);
      for (const s of services.slice(0, MAGLEV)) {
        s.metadata!.annotations = { "kube-router.io/service.scheduler": "mh" };
      }
      await Deno.writeTextFile(
        `${dir}/objects.json`,
        JSON.stringify({
          kind: "List",
          items: [
            { apiVersion: "v1", kind: "Node", metadata: { name: "node-a" } },
            ...services.map((s) => ({ apiVersion: "v1", kind: "Service", ...s })),
            ...slices.map((s) => ({ apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s })),
          ],
        }),
      );
      proxy = t.startProxy([
        "--proxy-mode=nftables",
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--cluster-cidr=10.0.0.0/8",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
      ]);
      const healthz = () => t.nodeAgent.http("127.0.0.1", 10256, healthzMs, "/healthz");
      // The first sync is in once the proxy says when it applied the Services.
      await eventually(async () => {
        const list = await t.nodeAgent.http("127.0.0.1", 10249, 2000, "/debug/services");
        assert(list.startsWith("200 "), list);
        const { services: held } = JSON.parse(list.slice(4)) as {
          services: Array<{ applied: string | null }>;
        };
        assert(held.length === SERVICES && held.every((s) => s.applied !== null), "every Service is applied");
      }, 120_000);

      // nft 1.0.6's IPv6 affinity limit is nothing to say on a node no Service asks it of.
      assert(!/^[WE].*affinity/im.test(proxy.log()), proxy.log());

      // One report over the whole table, probed every 100 ms while it runs.
      const report = t.runProgram(["explain", "bench/svc-0", "--output=json"]);
      let done = false;
      const probes: number[] = [];
      const probing = (async () => {
        while (!done) {
          const start = performance.now();
          const answer = await healthz();
          probes.push(performance.now() - start);
          assert(answer.startsWith("200"), `/healthz during explain: ${answer}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const r = await report.finally(() => done = true);
      await probing;
      assertEquals(r.code, 0, r.stderr + r.stdout.slice(0, 2000));
      const parsed = JSON.parse(r.stdout) as { service: string; disagreements: number; ports: unknown[] };
      assertEquals([parsed.service, parsed.disagreements, parsed.ports.length > 0], ["bench/svc-0", 0, true]);
      assert(probes.length >= 3, `${probes.length} probes while explain ran`);
      assert(
        Math.max(...probes) < healthzMs,
        `/healthz took up to ${Math.max(...probes).toFixed(0)} ms (slowdown ${slow.toFixed(1)})`,
      );

      // SIGTERM while another report is being read: the program ends within 2 s (idle).
      const reportMs = probes.reduce((a, b) => a + b + 100, 0);
      const second = t.runProgram(["explain", "bench/svc-1", "--output=json"]);
      await new Promise((r) => setTimeout(r, Math.min(300, reportMs / 4)));
      const start = performance.now();
      const status = await proxy.stop("SIGTERM");
      const seconds = (performance.now() - start) / 1000;
      assertEquals(status.code, 0, proxy.log());
      assert(seconds < stopS, `stopped in ${seconds.toFixed(2)} s (slowdown ${slow.toFixed(1)})`);
      const cut = await second;
      console.log(
        `explain took about ${reportMs.toFixed(0)} ms; the second: exit ${cut.code} ${cut.stderr.trim()}`,
      );
      assertEquals(cut.code, 1, "the report SIGTERM interrupted is not answered");
    } catch (e) {
      console.error(proxy?.log());
      throw e;
    } finally {
      await proxy?.stop("SIGKILL");
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
