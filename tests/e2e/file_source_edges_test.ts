/**
 * The file source at its edges while the proxy runs, on a real kernel in a namespace this test
 * creates: the file deleted, moved away, truncated, its Node renamed, and written in place by a
 * writer slower than any time window. Each time the kernel's rules stay exactly as they were, the
 * refusal is said once at the default verbosity, counted, and named on `/readyz`'s body (which
 * stays 200); a real change applies. The program runs as `deno task start` does.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { CONVERGE_MS } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import { Topology } from "./netns.ts";

const kernel = await realKernel(["nft", "curl"]);

const NODE = `apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: 192.168.0.2 }] }
`;

/** Six NodePort Services, each with one endpoint; `last` is the sixth's cluster IP. */
function services(last = "172.30.0.16"): string {
  return Array.from({ length: 6 }, (_, i) => {
    const ip = i === 5 ? last : `172.30.0.${11 + i}`;
    return `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: s${i} }
spec:
  type: NodePort
  clusterIP: ${ip}
  clusterIPs: [${ip}]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: ${30100 + i} }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: s${i}-1, labels: { kubernetes.io/service-name: s${i} } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints: [{ addresses: [10.180.0.${4 + i}], conditions: { ready: true } }]
`;
  }).join("---\n");
}

Deno.test({
  name:
    `e2e file source edges: vanished, moved, emptied, Node renamed, written slowly: the kernel's rules stay, said and counted${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-filesrc-" });
    const file = `${dir}/objects.yaml`;
    const full = NODE + "---\n" + services();
    try {
      await t.init();
      await Deno.writeTextFile(file, full);
      const p = t.startProxy([
        "--proxy-mode=nftables",
        `--source=file:${file}`,
        "--hostname-override=node-a",
      ]);
      await eventually(() => assertMatch(p.log(), /First sync in the kernel.*services=6/), CONVERGE_MS);
      const rules = async () =>
        (await t.exec(t.node, ["nft", "list", "table", "ip", "kube-proxy"])).replace(
          /counter packets \d+ bytes \d+/g,
          "",
        );
      const curl = (path: string, port: number) =>
        t.exec(t.node, ["curl", "-s", "-w", "\n%{http_code}", `http://127.0.0.1:${port}${path}`], {
          allowFail: true,
        });
      const programmed = await rules();
      assert(programmed.includes("172.30.0.16 . tcp . 80"), programmed);
      const refusals = async () =>
        Number(/^kubeproxy_source_file_errors_total (\d+)/m.exec(await curl("/metrics", 10249))?.[1] ?? "0");
      const refused = async (edit: () => Promise<void>, reason: RegExp) => {
        const [before, said] = [await refusals(), p.log().match(/Source change refused/g)?.length ?? 0];
        await edit();
        await eventually(async () => {
          assert(await refusals() > before, "counted");
          const ready = await curl("/readyz", 10256);
          assert(ready.endsWith("\n200"), ready);
          assertMatch(ready, reason);
        }, CONVERGE_MS);
        // Longer than any settle: nothing reaches the kernel.
        await new Promise((r) => setTimeout(r, 1500));
        assertEquals(await rules(), programmed);
        assertEquals(p.log().match(/Source change refused/g)?.length, said + 1, "said once");
      };
      const restore = async () => {
        await Deno.writeTextFile(`${file}.tmp`, full);
        await Deno.rename(`${file}.tmp`, file);
        await eventually(
          async () => assert(!(await curl("/readyz", 10256)).includes("conditions")),
          CONVERGE_MS,
        );
      };
      await refused(
        () => Deno.remove(file),
        /"source":"changes refused since [^"]+: \\"[^"]+objects.yaml\\" is gone/,
      );
      await restore();
      await refused(() => Deno.rename(file, `${dir}/elsewhere.yaml`), /is gone/);
      await restore();
      await refused(() => Deno.writeTextFile(file, ""), /emptied/);
      await restore();
      await refused(
        () => Deno.writeTextFile(file, full.replace("name: node-a", "name: node-b")),
        /no longer defines Node \\"node-a\\"/,
      );
      await restore();
      // In place, 400 bytes at a time, 1.2 s apart at first (longer than any time window), the file
      // held open: no prefix of it reaches the kernel.
      const next = NODE + "---\n" + services("172.30.0.26");
      const f = await Deno.open(file, { write: true, truncate: true });
      const bytes = new TextEncoder().encode(next);
      for (let at = 0; at < bytes.length; at += 400) {
        await f.write(bytes.subarray(at, at + 400));
        await new Promise((r) => setTimeout(r, at < 1600 ? 1200 : 100));
        assertEquals(await rules(), programmed, `after ${at + 400} of ${bytes.length} bytes`);
      }
      f.close();
      await eventually(async () => {
        const now = await rules();
        assert(now.includes("172.30.0.26 . tcp . 80") && !now.includes("172.30.0.16 . tcp . 80"), now);
      }, CONVERGE_MS);
      assert(
        !/Source change refused/.test(p.log().split("Source usable again").at(-1)!),
        "the slow write was not refused",
      );
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
