/**
 * Runs the one flow table against every mode's adapter: each row that applies to a mode must
 * reach the same endpoints with the same verdict (and, where the mode reports it, masquerade).
 */
import { assertEquals } from "../support/assert.ts";
import type { ProxyMode } from "../../proxier/options/config.ts";
import type { Datapath, FlowSetup, Loaded } from "./datapath.ts";
import { iptablesDatapath } from "./iptables_datapath.ts";
import { ipvsDatapath } from "./ipvs_datapath.ts";
import { nftablesDatapath } from "./nftables_datapath.ts";
import { NODE_A } from "./objects.ts";
import { FLOWS } from "./table.ts";
import { expectConnection } from "../../proxier/read_side/expectation.ts";
import { MODES } from "../../proxier/modes.ts";
import { userspaceDatapath } from "./userspace_datapath.ts";

/** Every mode's adapter, typed by the one mode list: a mode without one does not compile. */
const DATAPATHS: Readonly<Record<ProxyMode, Datapath>> = {
  iptables: iptablesDatapath,
  ipvs: ipvsDatapath,
  nftables: nftablesDatapath,
  userspace: userspaceDatapath,
};

for (const dp of Object.values(DATAPATHS)) {
  Deno.test(`flows: ${dp.mode} mode sends every packet where the table says`, async (t) => {
    const loaded = new Map<string, Loaded>();
    for (const row of FLOWS) {
      const reason = row.doesNotApplyIn?.[dp.mode];
      await t.step({
        name: reason === undefined ? row.name : `${row.name} (not for ${dp.mode}: ${reason})`,
        ignore: reason !== undefined,
        async fn() {
          const setup: FlowSetup = {
            objects: row.objects,
            node: row.node ?? NODE_A,
            options: row.options ?? {},
          };
          // A second connection may leave state (nftables' affinity records): its row loads alone.
          const key = JSON.stringify([
            setup.objects.id,
            setup.node.id,
            setup.options,
            row.packet.again && row.name,
          ]);
          let trace = loaded.get(key);
          if (trace === undefined) loaded.set(key, trace = await dp.load(setup));
          const r = trace(row.packet);
          const e = row.expectIn?.[dp.mode] ?? row.expect;
          // The model (explain's) says the same as the row, without reading a rule.
          const m = expectConnection(MODES.get(dp.mode)!, trace.view, {
            src: row.packet.src,
            dst: row.packet.dst,
            port: row.packet.port,
            protocol: row.packet.proto,
            fromNode: row.packet.fromNode,
          });
          assertEquals(
            {
              verdict: m.verdict,
              endpoints: m.endpoints,
              masquerade: dp.reportsMasquerade && e.verdict === "DNAT" ? m.masquerade : undefined,
            },
            {
              verdict: e.verdict,
              endpoints: e.verdict === "DNAT" ? [...e.endpoints].sort() : [],
              masquerade: dp.reportsMasquerade && e.verdict === "DNAT" ? e.masquerade : undefined,
            },
            `the model, for ${row.name}: ${m.why}`,
          );
          // ...and says why each other endpoint of the port is not reached.
          assertEquals(
            Object.fromEntries(m.excluded.map((x) => [x.endpoint, x.reason])),
            Object.fromEntries(
              Object.entries({ ...row.excluded, ...row.excludedIn?.[dp.mode] }).filter(([, r]) => r !== null),
            ),
            `why the model leaves endpoints out, for ${row.name}`,
          );
          if (e.verdict === "DNAT" && e.sticky === true) {
            const masquerade = dp.reportsMasquerade ? r.masquerade : e.masquerade;
            assertEquals(
              {
                verdict: r.verdict,
                reached: r.endpoints.length,
                oneOfThem: e.endpoints.includes(r.endpoints[0]),
                masquerade,
              },
              { verdict: "DNAT", reached: 1, oneOfThem: true, masquerade: e.masquerade },
              `${row.name}: reached ${JSON.stringify(r.endpoints)}`,
            );
          } else if (e.verdict === "DNAT") {
            const masquerade = dp.reportsMasquerade ? r.masquerade : e.masquerade;
            assertEquals(
              { verdict: r.verdict, endpoints: r.endpoints, masquerade },
              { verdict: e.verdict, endpoints: e.endpoints, masquerade: e.masquerade },
              row.name,
            );
          } else {
            assertEquals({ verdict: r.verdict, endpoints: r.endpoints }, {
              verdict: e.verdict,
              endpoints: [],
            }, row.name);
          }
        },
      });
    }
  });
}
