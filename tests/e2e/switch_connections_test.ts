/**
 * Switching a live node between the iptables and nftables modes breaks no connection
 * (`switch_scenario.ts`): the old mode's rules stay until the new one's first sync is in, and
 * established flows keep their conntrack NAT. The counts are printed for the README.
 */
import { CONVERGE_MS } from "../support/bounds.ts";
import { assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { Topology } from "./netns.ts";
import { realKernel } from "../support/namespace.ts";
import { describeCounts, switchScenario } from "./switch_scenario.ts";

const { ignore, note } = await realKernel(["nft", "iptables-nft-restore", "iptables-nft-save", "conntrack"]);

for (const [from, to] of [["iptables", "nftables"], ["nftables", "iptables"]] as const) {
  Deno.test({
    name:
      `e2e switch ${from} -> ${to}: established TCP connections and UDP flows survive, new connections are served throughout${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const t = new Topology();
      const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-switch-conn-" });
      try {
        await t.init();
        const nft = ["--iptables-backend=nft"];
        const counts = await switchScenario(t, dir, { mode: from, args: nft }, { mode: to, args: nft }, () =>
          // The old mode's rules are gone once the new one serves.
          eventually(async () => {
            const table = (await t.exec(t.node, ["nft", "list", "tables"])).includes("kube-proxy");
            const chains = (await t.exec(t.node, ["iptables-nft-save"])).includes(":KUBE-SERVICES");
            assertEquals([table, chains], [to === "nftables", to === "iptables"]);
          }, CONVERGE_MS));
        console.log(describeCounts(`switch ${from} -> ${to}`, counts));
        assertEquals([counts.tcpBroken, counts.udpLost, counts.udpMoved, counts.failed], [0, 0, 0, 0]);
      } finally {
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
