/**
 * Runs inside the VM (tests/vm/ipvs_vm_test.ts starts it there): taking a node over from the ipvs
 * mode with the nftables mode, with established TCP connections and UDP flows through IPVS and a
 * stream of new connections (`tests/e2e/switch_scenario.ts`). With the drain the virtual servers
 * and kube-ipvs0 stay while the connections live, and nothing breaks; they go once the connections
 * are closed. Without it (--migration-drain-timeout=0) the counts show what the drain is for.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { eventually } from "../../support/net_helpers.ts";
import { CONVERGE_MS, IN_VM } from "../../support/bounds.ts";
import { Topology } from "../../e2e/netns.ts";
import { describeCounts, switchScenario } from "../../e2e/switch_scenario.ts";

/** ipvs <-> nftables: the unserved ports and every Service's scheduler (rr, random); neither drops INVALID packets. */
const GROUPS = ["unserved-ports", "scheduler"];

for (const drain of ["15m", "0s"]) {
  Deno.test({
    name: `switch ipvs -> nftables, --migration-drain-timeout=${drain}`,
    ignore: !IN_VM,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const t = new Topology();
      const dir = await Deno.makeTempDir();
      const ipvs0 = async () =>
        (await t.exec(t.node, ["ip", "-o", "link", "show", "kube-ipvs0"], { allowFail: true })).trim() !== "";
      const servers = async () => (await t.exec(t.node, ["ipvsadm", "-Sn"])).trim() !== "";
      try {
        await t.init();
        const migrate = async (to: string, fromMode?: string) => {
          const r = await t.runProgram([
            "migrate",
            `--to=${to}`,
            ...(fromMode === undefined ? [] : [`--from-mode=${fromMode}`]),
            `--source=file:${dir}`,
            "--hostname-override=node-a",
            "--cluster-cidr=10.180.0.0/16",
            "--output=json",
          ]);
          const report = JSON.parse(r.stdout);
          return [report.from.mode, report.groups.map((g: { cause: string }) => g.cause)];
        };
        const counts = await switchScenario(
          t,
          dir,
          // An IPVS UDP entry lives 20 s after its last datagram (the kernel's default is 300 s); the
          // flows send through the switch, so the drain ends 20 s after the test's last datagram.
          { mode: "ipvs", args: ["--ipvs-udp-timeout=20s"] },
          { mode: "nftables", args: [`--migration-drain-timeout=${drain}`] },
          async () => {
            if (drain !== "0s") {
              // What the nftables mode's migrate says of the ipvs mode, and after the switch the other way.
              // Both are on the node while the ipvs datapath drains: the mode that programs it is named.
              assertEquals(await migrate("ipvs", "nftables"), ["nftables", GROUPS]);
            }
            // The rules and sets go once nftables serves; the datapath stays while connections use
            // it (with the drain), or goes with them (without).
            await eventually(async () => {
              assertEquals((await t.exec(t.node, ["ipset", "list", "-n"])).trim(), "");
              assertEquals([await ipvs0(), await servers()], [drain !== "0s", drain !== "0s"]);
            }, CONVERGE_MS);
          },
          async () => {
            if (drain === "0s") return;
            await eventually(
              async () => assertEquals([await ipvs0(), await servers()], [false, false]),
              CONVERGE_MS,
            );
          },
          async () => {
            if (drain !== "0s") assertEquals(await migrate("nftables"), ["ipvs", GROUPS]);
          },
        );
        console.log(describeCounts(`switch ipvs -> nftables, drain ${drain}`, counts));
        assertEquals(counts.failed, 0, "new connections are served throughout");
        if (drain === "0s") {
          assert(counts.tcpBroken > 0, "without the drain established IPVS connections break");
        } else assertEquals([counts.tcpBroken, counts.udpLost], [0, 0]);
      } finally {
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
