/**
 * One switch of a live node from one mode to another, as `switch_connections_test.ts` (here) and the
 * ipvs guest run it: TCP connections and a UDP flow opened before the switch (from a pod, through
 * prerouting, and from the node, through output) are used after it, while a stream of new
 * connections runs through it. Returns what broke.
 * @module
 */
import { assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";
import type { Agent, Topology } from "./netns.ts";

const VIP = "172.30.0.10";

/** What a switch broke, and what it was measured on. */
export interface SwitchCounts {
  readonly tcp: number;
  readonly tcpBroken: number;
  readonly udp: number;
  /** UDP flows that got no answer after the switch. */
  readonly udpLost: number;
  /** UDP flows answered after the switch by another endpoint than before (a datagram re-balanced). */
  readonly udpMoved: number;
  readonly opened: number;
  readonly failed: number;
  /** From the old mode's stop until the new one was ready and settled. */
  readonly switchMs: number;
  /** From the connections' close until `closed` held. */
  readonly closedMs: number;
}

function objects(pods: Array<{ ip: string }>): string {
  return `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec:
  clusterIP: ${VIP}
  clusterIPs: [${VIP}]
  ports:
    - { name: hello, protocol: TCP, port: 80, targetPort: 8080 }
    - { name: echo, protocol: TCP, port: 81, targetPort: 8081 }
    - { name: dns, protocol: UDP, port: 53, targetPort: 8080 }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports:
  - { name: hello, protocol: TCP, port: 8080 }
  - { name: echo, protocol: TCP, port: 8081 }
  - { name: dns, protocol: UDP, port: 8080 }
endpoints:
${pods.map((p) => `  - { addresses: [${p.ip}], conditions: { ready: true }, nodeName: node-a }`).join("\n")}
`;
}

/**
 * Runs `from` on the topology's node, opens the connections, stops it, starts `to` (each with its
 * `args`), waits for `to` to be ready and for `settled` (the old mode's objects gone, say), then
 * uses every connection, closes them and waits for `closed` (with `to` still running); returns the
 * counts. `running` runs once `from` serves, before anything is opened. The topology is the caller's (it closes it).
 */
export async function switchScenario(
  t: Topology,
  dir: string,
  from: { mode: string; args?: string[] },
  to: { mode: string; args?: string[] },
  settled: () => Promise<void>,
  closed: () => Promise<void> = () => Promise.resolve(),
  running: () => Promise<void> = () => Promise.resolve(),
): Promise<SwitchCounts> {
  const pods = [await t.addPod("pod-a", 8080), await t.addPod("pod-b", 8080)];
  const [client, streamer] = [await t.addBridgePod("kpdsw0"), await t.addBridgePod("kpdsw0")];
  await Deno.writeTextFile(`${dir}/web.yaml`, objects(pods));
  const start = (m: { mode: string; args?: string[] }) =>
    t.startProxy([
      `--proxy-mode=${m.mode}`,
      `--source=file:${dir}`,
      "--hostname-override=node-a",
      "--cluster-cidr=10.180.0.0/16",
      "--healthz-bind-address=127.0.0.1:10256",
      "--metrics-bind-address=127.0.0.1:10249",
      ...m.args ?? [],
    ]);
  const ready = () =>
    eventually(async () => {
      assertEquals((await t.nodeAgent.http("127.0.0.1", 10256, 1000, "/readyz")).slice(0, 3), "200");
      assertEquals(/^pod-[ab]$/.test(await t.nodeAgent.tcp(VIP, 80)), true);
    }, CONVERGE_MS);
  let proxy = start(from);
  try {
    await ready();
    await running();
    const kept: Array<[Agent, string]> = [];
    for (const [who, agent] of [["pod", client.agent], ["node", t.nodeAgent]] as const) {
      for (let i = 0; i < 3; i++) {
        const id = `${who}-${i}`;
        const first = await agent.open(id, VIP, 81, ANSWER_MS);
        assertEquals(/^pod-[ab]$/.test(first), true, `${id}: ${first}`);
        kept.push([agent, id]);
      }
    }
    const udp = (agent: Agent) => agent.udp(VIP, 53, { srcPort: 45053, timeoutMs: ANSWER_MS });
    const udpBefore = [await udp(client.agent), await udp(t.nodeAgent)];
    let stop = false, opened = 0, failed = 0;
    const stream = (async () => {
      while (!stop) {
        const r = await streamer.agent.tcp(VIP, 80, ANSWER_MS);
        opened++;
        if (!/^pod-[ab]$/.test(r)) failed++;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    // The UDP flows keep sending through the switch, as a client's would: a kernel's UDP entry lives
    // from one datagram to the next, so the flow after the switch is the one from before it however
    // long the switch takes.
    const keepAlive = (agent: Agent) =>
      (async () => {
        while (!stop) {
          await udp(agent);
          await new Promise((r) => setTimeout(r, 1000));
        }
      })();
    const flows = [keepAlive(client.agent), keepAlive(t.nodeAgent)];
    const switchStart = performance.now();
    await proxy.stop();
    proxy = start(to);
    let switchMs = 0;
    try {
      await ready();
      await settled();
      switchMs = performance.now() - switchStart;
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      stop = true;
      await Promise.all([stream, ...flows]);
    }
    let tcpBroken = 0;
    for (const [agent, id] of kept) {
      if (!/^pod-[ab]:after$/.test(await agent.say(id, "after", ANSWER_MS))) tcpBroken++;
    }
    const udpAfter = [await udp(client.agent), await udp(t.nodeAgent)];
    const udpLost = udpAfter.filter((r) => !/^pod-[ab]$/.test(r)).length;
    const udpMoved = udpAfter.filter((r, i) => /^pod-[ab]$/.test(r) && r !== udpBefore[i]).length;
    for (const [agent, id] of kept) await agent.request({ op: "close", id, port: 0 });
    const closeStart = performance.now();
    await closed();
    const closedMs = performance.now() - closeStart;
    return { tcp: kept.length, tcpBroken, udp: 2, udpLost, udpMoved, opened, failed, switchMs, closedMs };
  } catch (e) {
    console.error(proxy.log());
    throw e;
  } finally {
    await proxy.stop();
  }
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** One line of the counts, as the README records them. */
export function describeCounts(what: string, c: SwitchCounts): string {
  return `${what}: ${c.tcp} TCP connections, ${c.tcpBroken} broken; ${c.udp} UDP flows, ${c.udpLost} lost, ` +
    `${c.udpMoved} answered by another endpoint; ` +
    `${c.opened} new connections, ${c.failed} failed; switched in ${seconds(c.switchMs)}, ` +
    `settled ${seconds(c.closedMs)} after the close`;
}
