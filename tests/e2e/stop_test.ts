/**
 * Stopping during a long sync, as systemd does (SIGTERM, then SIGKILL after 90 s): the program
 * exits within 2 s, and the kernel holds either the previous rules or the new ones, never part.
 */
import { CONVERGE_MS } from "../support/bounds.ts";
import { generate } from "../../bench/objects.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { Topology } from "./netns.ts";
import type { ProxyProcess } from "../support/program.ts";
import { realKernel } from "../support/namespace.ts";

const { ignore, note } = await realKernel(["iptables-nft", "iptables-nft-restore", "iptables-nft-save"]);

/** Services loaded by the first sync: on nf_tables, about 5 s of iptables-restore. */
const SERVICES = 2000;

Deno.test({
  name: `e2e stop: SIGTERM during a long first sync exits within 2 s; each table is all or nothing${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-stop-" });
    let proxy: ProxyProcess | undefined;
    try {
      await t.init();
      const { services, slices } = generate(SERVICES);
      await Deno.writeTextFile(
        `${dir}/objects.json`,
        JSON.stringify({
          kind: "List",
          items: [
            ...services.map((s) => ({ apiVersion: "v1", kind: "Service", ...s })),
            ...slices.map((s) => ({ apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", ...s })),
          ],
        }),
      );
      proxy = t.startProxy([
        "--proxy-mode=iptables",
        "--iptables-backend=nft",
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
      ]);
      // The program's own restores (other tests' run beside it, in other namespaces).
      const restorePid = async () =>
        (await t.exec(t.node, ["pgrep", "-o", "-P", String(proxy!.pid), "-f", "iptables-nft-restore"], {
          allowFail: true,
        })).trim();
      // The long restore: one process still running half a second after it was seen (the short
      // restores before it come and go).
      let pid = "";
      await eventually(async () => {
        pid = await restorePid();
        assert(pid !== "", "the first sync's restore runs");
        await new Promise((r) => setTimeout(r, 500));
        assertEquals(await restorePid(), pid, "the same restore still runs: long enough to interrupt");
      }, CONVERGE_MS);
      const start = performance.now();
      const status = await proxy.stop("SIGTERM");
      const seconds = (performance.now() - start) / 1000;
      assertEquals(status.code, 0, proxy.log());
      assert(seconds < 2, `stopped in ${seconds.toFixed(2)} s`);
      assert(proxy.log().includes("Sync interrupted by shutdown"), proxy.log());
      const alive = await Deno.stat(`/proc/${pid}`).then(() => true, () => false);
      assertEquals(alive, false, "no restore left running");
      const nat = await t.exec(t.node, ["iptables-nft-save", "-t", "nat"]);
      const svcChains = nat.split("\n").filter((l) => l.startsWith(":KUBE-SVC-")).length;
      assert(svcChains === 0 || svcChains === SERVICES, `nat holds ${svcChains} of ${SERVICES} services`);
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
