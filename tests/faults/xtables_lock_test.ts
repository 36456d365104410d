/**
 * The xtables lock held by another process for 10 s (iptables-legacy, the backend that takes it):
 * the Service keeps its previous rules meanwhile, the program says the lock is why its syncs wait or
 * fail, and an endpoint change made during the hold reaches the kernel once the lock is free. Held
 * at start, `/readyz` answers 503 until the first sync is in the kernel.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { ANSWER_MS, CONVERGE_MS, pace } from "../support/bounds.ts";
import { Topology } from "../e2e/netns.ts";
import type { ProxyProcess } from "../support/program.ts";
import { holdXtablesLock, realKernel } from "../support/namespace.ts";
import type { Pod } from "../e2e/netns.ts";

const { ignore, note } = await realKernel(["iptables-legacy", "iptables-legacy-restore", "flock"]);

const objects = (pod: Pod) => ({
  kind: "List",
  items: [
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { namespace: "lock", name: "svc" },
      spec: {
        type: "ClusterIP",
        clusterIP: "172.30.61.1",
        clusterIPs: ["172.30.61.1"],
        ports: [{ name: "p", port: 80, targetPort: 8080, protocol: "TCP" }],
      },
    },
    {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { namespace: "lock", name: "svc-1", labels: { "kubernetes.io/service-name": "svc" } },
      addressType: "IPv4",
      ports: [{ name: "p", port: 8080, protocol: "TCP" }],
      endpoints: [{ addresses: [pod.ip], conditions: { ready: true }, nodeName: "node-a" }],
    },
  ],
});

Deno.test({
  name:
    `xtables lock held 10 s (legacy backend): the old rules serve, the failures name the lock, the change lands after${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-xtables-lock-" });
    const lock = `${dir}/xtables.lock`;
    const write = async (pod: Pod) => {
      // Renamed into place: the file source reads it at once.
      await Deno.writeTextFile(`${dir}/.objects.json`, JSON.stringify(objects(pod)));
      await Deno.rename(`${dir}/.objects.json`, `${dir}/objects/objects.json`);
    };
    let proxy: ProxyProcess | undefined;
    let holder: Deno.ChildProcess | undefined;
    try {
      await t.init();
      const [a, b] = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
      await Deno.mkdir(`${dir}/objects`);
      await write(a);
      proxy = t.startProxy(
        [
          "--proxy-mode=iptables",
          "--iptables-backend=legacy",
          `--source=file:${dir}/objects`,
          "--hostname-override=node-a",
          "--iptables-min-sync-period=100ms",
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
        ],
        t.node,
        { XTABLES_LOCKFILE: lock },
      );
      const answer = () => t.nodeAgent.tcp("172.30.61.1", 80, ANSWER_MS);
      const readyz = async () =>
        (await t.nodeAgent.http("127.0.0.1", 10256, ANSWER_MS, "/readyz")).slice(0, 3);
      await eventually(async () => assertEquals(await answer(), "pod-a"), CONVERGE_MS);
      assertEquals(await readyz(), "200", "ready once the first sync is in");

      const slow = pace();
      holder = await holdXtablesLock(lock, 10);
      const heldAt = performance.now();
      await write(b);
      // While held: the previous rules stay and serve.
      await new Promise((r) => setTimeout(r, 3000));
      assertEquals(await answer(), "pod-a");
      await holder.status;
      const freedAfter = performance.now() - heldAt;
      await eventually(async () => assertEquals(await answer(), "pod-b"), CONVERGE_MS);
      await eventually(async () => assertEquals(await readyz(), "200"), CONVERGE_MS);
      const landed = (performance.now() - heldAt) / 1000;
      assert(freedAfter >= 9_500, `the lock was held ${freedAfter} ms`);
      // The change waits for the lock, then the next retry (backoff, 6 s on an idle machine) carries it.
      assert(
        landed < 10 + 6 * slow,
        `the change landed ${landed.toFixed(1)} s after the lock was taken (slowdown ${slow.toFixed(1)})`,
      );
      // Every step that waited past `-w 5` says so: a failed sync, or the check before a partial sync
      // that could not run (and so asks for a full one). Before, a check's failure read as "not
      // there": the log claimed drift ("the mangle canary chain is gone") that nobody made.
      const said = proxy.log().split("\n").filter((l) =>
        /Sync failed|Rules changed outside|Cleanup failed/.test(l)
      );
      assert(said.length > 0, proxy.log());
      for (const l of said) assertMatch(l, /exited 4: .*Another app is currently holding the xtables lock/);
    } catch (e) {
      console.error(proxy?.log());
      throw e;
    } finally {
      try {
        holder?.kill();
      } catch { /* ended */ }
      await holder?.status;
      await proxy?.stop("SIGKILL");
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    `xtables lock held at start (legacy backend): /readyz 503 until the first sync is in, then 200${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-xtables-ready-" });
    let proxy: ProxyProcess | undefined;
    let holder: Deno.ChildProcess | undefined;
    try {
      await t.init();
      const pod = await t.addPod("pod-a", 8080);
      await Deno.mkdir(`${dir}/objects`);
      await Deno.writeTextFile(`${dir}/objects/objects.json`, JSON.stringify(objects(pod)));
      // Held until the test has seen the proxy wait for it, however slowly the proxy starts.
      holder = await holdXtablesLock(`${dir}/xtables.lock`, 3600);
      proxy = t.startProxy(
        [
          "--proxy-mode=iptables",
          "--iptables-backend=legacy",
          `--source=file:${dir}/objects`,
          "--hostname-override=node-a",
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
        ],
        t.node,
        { XTABLES_LOCKFILE: `${dir}/xtables.lock` },
      );
      const readyz = () => t.nodeAgent.http("127.0.0.1", 10256, ANSWER_MS, "/readyz");
      // Listening, and not ready: nothing of this proxy is in the kernel yet.
      const before = await eventually(async () => {
        const r = await readyz();
        assert(r.startsWith("503"), r);
        return r;
      }, CONVERGE_MS);
      assertMatch(before, /"ready":false/);
      holder.kill();
      await holder.status;
      await eventually(async () => assertEquals((await readyz()).slice(0, 3), "200"), CONVERGE_MS);
      assertEquals(await t.nodeAgent.tcp("172.30.61.1", 80, ANSWER_MS), "pod-a");
    } catch (e) {
      console.error(proxy?.log());
      throw e;
    } finally {
      try {
        holder?.kill();
      } catch { /* ended */ }
      await holder?.status;
      await proxy?.stop("SIGKILL");
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
