import { assertEquals } from "../tests/support/assert.ts";
import type { V1Node } from "@kubernetes/client-node";
import { MemoryLogger } from "../tests/support/fixtures.ts";
import { NodeManager, type NodeManagerOptions } from "./node_manager.ts";
import { FakeClock } from "./runtime/clock.ts";

function node(o: { zone?: string; ips?: string[]; podCIDR?: string } = {}): V1Node {
  return {
    metadata: {
      name: "node-a",
      labels: o.zone === undefined ? {} : { "topology.kubernetes.io/zone": o.zone },
    },
    spec: o.podCIDR === undefined ? {} : { podCIDRs: [o.podCIDR] },
    status: { addresses: (o.ips ?? []).map((address) => ({ type: "InternalIP", address })) },
  };
}

function manager(over: Partial<NodeManagerOptions> = {}) {
  const clock = new FakeClock();
  const log = new MemoryLogger();
  let readies = 0;
  const m = new NodeManager({
    family: "IPv4",
    nodeName: "node-a",
    log,
    clock,
    nodeWaitMs: 30_000,
    onReady: () => readies++,
    ...over,
  });
  return { m, clock, log, readies: () => readies };
}

Deno.test("node manager: ready once the Node arrives after the list; a change of zone or address is 'changed', a label elsewhere 'same'", async () => {
  const { m, clock, readies } = manager();
  m.synced();
  assertEquals(m.ready, false);
  assertEquals(m.set(node({ zone: "z1", ips: ["192.168.0.2"] })), "ready");
  assertEquals([m.ready, readies()], [true, 0]);
  await clock.advance(60_000);
  assertEquals(readies(), 0, "the wait's timer was stopped");
  assertEquals(m.set(node({ zone: "z1", ips: ["192.168.0.2"] })), "same");
  assertEquals(m.set(node({ zone: "z2", ips: ["192.168.0.2"] })), "changed");
  assertEquals(m.topology, { nodeName: "node-a", zone: "z2" });
  assertEquals(m.set(node({ zone: "z2", ips: ["192.168.0.3"] })), "changed");
  assertEquals(m.primaryIP, "192.168.0.3");
});

Deno.test("node manager: without the Node the wait ends after nodeWaitMs, once, with a warning naming the Node and the flag", async () => {
  const { m, clock, log, readies } = manager();
  m.synced();
  await clock.advance(29_999);
  assertEquals(readies(), 0);
  await clock.advance(1);
  assertEquals([m.ready, readies()], [true, 1]);
  assertEquals(log.messages("warn"), [
    'No Node object "node-a" (--hostname-override, else this machine\'s hostname): syncing without its addresses and pod CIDRs, and taking them when it appears',
  ]);
});

Deno.test("node manager: the families of one node say the wait, its end and the Node's late arrival once; the rules take the Node then", async () => {
  const clock = new FakeClock();
  const log = new MemoryLogger();
  const saidOfNode = new Set<string>();
  const families = (["IPv4", "IPv6"] as const).map((family) =>
    new NodeManager({
      family,
      nodeName: "node-a",
      log,
      clock,
      nodeWaitMs: 30_000,
      saidOfNode,
      onReady: () => {},
    })
  );
  for (const m of families) m.synced();
  await clock.advance(30_000);
  assertEquals(log.messages("info"), ["Waiting for the Node object before the first sync"]);
  assertEquals(log.messages("warn").length, 1, log.messages("warn").join("\n"));
  for (const m of families) assertEquals(m.set(node({ ips: ["192.168.0.2", "fd00::2"] })), "changed");
  assertEquals(log.messages("info"), [
    "Waiting for the Node object before the first sync",
    "The Node object appeared; the rules now use its addresses and pod CIDRs",
  ]);
  assertEquals(families.map((m) => m.primaryIP), ["192.168.0.2", "fd00::2"]);
});

Deno.test("node manager: in NodeCIDR mode a Node without pod CIDRs is not enough; one with them is", () => {
  const { m } = manager({ localDetection: { mode: "NodeCIDR", clusterCIDRs: [] } });
  m.synced();
  assertEquals(m.set(node()), "same");
  assertEquals(m.ready, false);
  assertEquals(m.set(node({ podCIDR: "10.180.1.0/24" })), "ready");
  assertEquals(m.localDetector, { kind: "cidr", cidr: "10.180.1.0/24" });
});

Deno.test("node manager: render's addresses come from the Node object, and it says so", () => {
  const { m } = manager({ nodeWaitMs: 0, nodeIPsFromNode: true, nodePortAddresses: ["primary"] });
  assertEquals(m.describeIPs(), 'none (no Node object "node-a" in the source; --node-ip sets them)');
  m.set(node({ ips: ["192.168.0.2"] }));
  assertEquals(m.ips, ["192.168.0.2"]);
  assertEquals(m.describeIPs(), `192.168.0.2 (the Node object "node-a"'s InternalIP and ExternalIP)`);
  assertEquals(m.nodePortAddresses().nodeIPs(["192.168.0.2", "10.0.0.1"]), ["192.168.0.2"]);
});
