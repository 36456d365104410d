/**
 * Drift: rules this proxy owns changed or removed by someone else (firewalld reloading, an admin's
 * flush, one deleted rule, element, real server or address). Each kind is found by the check the
 * sync loop runs once per sync period (beside the syncs) and healed by the full sync it asks for,
 * not the hourly one; it is said once and counted.
 */
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { tracePacket } from "../../proxier/trace/iptables_walker.ts";
import { splitArgs } from "../../iptables/rule_args.ts";
import type { BaseProxier } from "../../proxier/base_proxier.ts";
import { TABLE } from "../../proxier/nftables/layout.ts";
import { traceNft } from "../../proxier/trace/nft_walker.ts";
import { assertEquals, assertMatch } from "../support/assert.ts";
import type { MemoryLogger } from "../support/fixtures.ts";
import { iptablesSetup } from "../flows/iptables_datapath.ts";
import { ipvsSetup } from "../flows/ipvs_datapath.ts";
import { nftablesSetup } from "../flows/nftables_datapath.ts";
import { feed } from "../flows/datapath.ts";
import { NODE_A, NODE_IP, REPRESENTATIVE } from "../flows/objects.ts";
import type { ProxyMetrics } from "../../proxier/metrics.ts";

/** After `drift`, one period's check and the sync it asks for: the drift named and the repairs counted. */
async function healed(
  p: BaseProxier,
  log: MemoryLogger,
  metrics: ProxyMetrics,
  drift: () => Promise<void> | void,
): Promise<{ drift: unknown; repairs: string | undefined }> {
  await p.syncNow();
  assertEquals(await p.repairDrift(), undefined, "nothing drifted yet");
  await drift();
  await p.repairDrift();
  await p.syncNow();
  const warn = log.records.filter((r) => r.msg === "Rules changed outside the proxy; doing a full sync");
  const page = await metrics.registry.metrics();
  return {
    drift: warn.map((w) => w.fields?.drift),
    repairs: /^kubeproxy_sync_proxy_rules_drift_repairs_total\{ip_family="IPv4"\} (\d+)$/m.exec(page)?.[1],
  };
}

/** The EndpointSlice of ns1/svc1 (172.30.0.41, one endpoint 10.180.0.1). */
const svc1Slice = () =>
  REPRESENTATIVE.build().slices.find((s) => s.metadata?.labels?.["kubernetes.io/service-name"] === "svc1")!;

const reachIpt = (fake: FakeIPTables, dst: string) =>
  tracePacket(fake, { src: "10.180.5.5", dst, port: 80, protocol: "tcp" }, [NODE_IP]).endpoints;

Deno.test("drift, iptables: the nat table flushed while the mangle canary stays heals at the next periodic sync", async () => {
  const { fake, proxier, log, metrics } = iptablesSetup();
  const r = await healed(proxier, log, metrics, () => fake.flushTable("nat"));
  assertEquals(r, { drift: ["the jump nat OUTPUT -> KUBE-SERVICES is gone"], repairs: "1" });
  assertEquals(reachIpt(fake, "172.30.0.41"), ["10.180.0.1:80"]);
});

Deno.test("drift, iptables: one service's jump deleted from KUBE-SERVICES heals at the next periodic sync", async () => {
  const { fake, proxier, log, metrics } = iptablesSetup();
  const r = await healed(proxier, log, metrics, async () => {
    const rule = fake.rules("nat", "KUBE-SERVICES")!.find((x) => x.includes("-d 172.30.0.41/32"))!;
    await fake.deleteRule("nat", "KUBE-SERVICES", splitArgs(rule));
    assertEquals(reachIpt(fake, "172.30.0.41"), [], "the drift broke the service");
  });
  assertEquals(r.repairs, "1");
  assertMatch(String(r.drift), /^nat KUBE-SERVICES holds \d+ rules; the last sync wrote \d+$/);
  assertEquals(reachIpt(fake, "172.30.0.41"), ["10.180.0.1:80"]);
});

Deno.test("drift, iptables: a restore that exited 0 having done nothing is redone at the next periodic check", async () => {
  const { fake, proxier, log, metrics } = iptablesSetup();
  const r = await healed(proxier, log, metrics, async () => {
    const restore = fake.restoreAll;
    fake.restoreAll = () => (fake.restoreAll = restore, Promise.resolve());
    proxier.onEndpointSliceDelete(svc1Slice());
    await proxier.syncNow();
    assertEquals(reachIpt(fake, "172.30.0.41"), ["10.180.0.1:80"], "the kernel kept the deleted endpoint");
  });
  assertEquals(r, {
    drift: ["the last restore (sync 2) is not in the kernel (it exited 0 having done nothing?)"],
    repairs: "1",
  });
  assertEquals(reachIpt(fake, "172.30.0.41"), [], "the endpoint is gone");
});

const reachNft = (fake: ReturnType<typeof nftablesSetup>["fake"], dst: string) =>
  traceNft(fake, "IPv4", TABLE, { src: "10.180.5.5", dst, port: 80, protocol: "tcp" }, [NODE_IP]).endpoints;

Deno.test("drift, nftables: the table flushed (chains kept) heals at the next periodic sync", async () => {
  const { fake, proxier, log, metrics } = nftablesSetup();
  const r = await healed(proxier, log, metrics, () => fake.apply("flush table ip kube-proxy\n"));
  assertEquals(r, {
    drift: ["no rule uses map service-ips any more (chain services or the table flushed?)"],
    repairs: "1",
  });
  assertEquals(reachNft(fake, "172.30.0.41"), ["10.180.0.1:80"]);
});

Deno.test("drift, nftables: one service's element deleted heals at the next periodic sync", async () => {
  const { fake, proxier, log, metrics } = nftablesSetup();
  const r = await healed(proxier, log, metrics, async () => {
    await fake.apply("delete element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 }\n");
    assertEquals(reachNft(fake, "172.30.0.41"), [], "the drift broke the service");
  });
  assertEquals(r.repairs, "1");
  assertEquals(r.drift, [
    "map service-ips lacks 172.30.0.41 . tcp . 80, which the last sync wrote (Could not process rule: No such file or directory: service-ips 172.30.0.41 . tcp . 80)",
  ]);
  assertEquals(reachNft(fake, "172.30.0.41"), ["10.180.0.1:80"]);
});

Deno.test("drift, nftables: a transaction nft said it applied but did not is redone at the next periodic check", async () => {
  const { fake, proxier, log, metrics } = nftablesSetup();
  const r = await healed(proxier, log, metrics, async () => {
    const apply = fake.apply;
    fake.apply = () => (fake.apply = apply, Promise.resolve());
    // The endpoint moves: every element count stays.
    const moved = svc1Slice();
    moved.endpoints![0].addresses = ["10.180.0.9"];
    proxier.onEndpointSliceUpdate(svc1Slice(), moved);
    await proxier.syncNow();
    assertEquals(reachNft(fake, "172.30.0.41"), ["10.180.0.1:80"], "the kernel kept the deleted endpoint");
  });
  assertEquals(r, {
    drift: ["the last transaction (2) is not in the kernel (nft exited 0 having done nothing?)"],
    repairs: "1",
  });
  assertEquals(reachNft(fake, "172.30.0.41"), ["10.180.0.9:80"], "the endpoint moved");
});

Deno.test("drift, ipvs: a real server deleted, an address removed from kube-ipvs0: each heals at the next periodic sync", async () => {
  const s = ipvsSetup();
  feed(s.proxier, { node: NODE_A, objects: REPRESENTATIVE });
  const first = await healed(
    s.proxier,
    s.log,
    s.metrics,
    () => s.ipvs.apply(["-d -t 172.30.0.41:80 -r 10.180.0.1:80"]),
  );
  assertEquals(first, { drift: ["IPVS holds 14 real servers; the last sync left 15"], repairs: "1" });
  assertEquals((s.ipvs.reals("TCP/172.30.0.41:80") ?? []).map((r) => r.address), ["10.180.0.1"]);
  await s.link.apply([], ["172.30.0.41"]);
  await s.proxier.repairDrift();
  await s.proxier.syncNow();
  assertEquals([...s.link.bound].filter((ip) => ip === "172.30.0.41"), ["172.30.0.41"], "re-bound");
  const page = await s.metrics.registry.metrics();
  assertEquals(/drift_repairs_total\{ip_family="IPv4"\} (\d+)/.exec(page)?.[1], "2");
});

Deno.test("drift: a sync asked for while the thorough check reads the kernel runs first; the check gives way and finds the drift at its next run", async () => {
  const s = ipvsSetup();
  feed(s.proxier, { node: NODE_A, objects: REPRESENTATIVE });
  await s.proxier.syncNow();
  await s.ipvs.apply(["-d -t 172.30.0.41:80 -r 10.180.0.1:80"]);
  const order: string[] = [];
  const apply = s.ipvs.apply.bind(s.ipvs);
  s.ipvs.apply = (lines) => (order.push("sync writes"), apply(lines));
  const found = s.proxier.repairDrift().then((d) => (order.push("check done"), d));
  // A change arrives and its sync is asked for while the check is about to read the kernel.
  s.proxier.onEndpointSliceDelete(
    REPRESENTATIVE.build().slices.find((x) => x.metadata?.labels?.["kubernetes.io/service-name"] === "svc2")!,
  );
  await s.proxier.syncNow();
  assertEquals(await found, undefined, "a check cut short says nothing");
  assertEquals(order, ["check done", "sync writes"], "the sync did not wait for a reading of the kernel");
  // The next check finds what drifted, and the full sync it asks for repairs it.
  assertMatch(String(await s.proxier.repairDrift()), /^IPVS holds \d+ real servers; the last sync left \d+$/);
  await s.proxier.syncNow();
  assertEquals((s.ipvs.reals("TCP/172.30.0.41:80") ?? []).map((r) => r.address), ["10.180.0.1"]);
});
