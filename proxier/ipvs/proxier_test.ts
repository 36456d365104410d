import { assert, assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { ep, HOSTILE, makeEndpointSlice, makeService } from "../../tests/support/fixtures.ts";
import { ipvsSetup } from "../../tests/flows/ipvs_datapath.ts";
import { NODE_A, NODE_IP, REPRESENTATIVE } from "../../tests/flows/objects.ts";
import { feed } from "../../tests/flows/datapath.ts";
import { IpvsError, parseSave } from "../../iptables/ipvsadm.ts";
import { RestoreError } from "../../iptables/iptables.ts";
import { traceIpvs } from "./trace.ts";
import { GRACEFUL_TERMINATION_MAX_MS } from "./graceful_termination.ts";
import { assertGolden } from "../../tests/support/golden.ts";

const VS = "TCP/172.30.0.41:80";

function start(eps: string[] = ["10.180.0.1", "10.180.0.2"], over = {}) {
  const s = ipvsSetup(over);
  s.proxier.onServiceAdd(makeService("ns1", "svc1"));
  s.proxier.onEndpointSliceAdd(
    makeEndpointSlice("ns1", "svc1", (x) => x.endpoints = eps.map((ip) => ep(ip))),
  );
  s.proxier.onServicesSynced();
  s.proxier.onEndpointSlicesSynced();
  return s;
}

const reals = (s: ReturnType<typeof ipvsSetup>, key = VS) =>
  (s.ipvs.reals(key) ?? []).map((r) => `${r.address}:${r.port} w${r.weight}`).sort();

Deno.test("ipvs full sync: a virtual server per cluster IP with its endpoints, the ipsets, kube-ipvs0 and the chains", async () => {
  const s = start();
  await s.proxier.syncNow();
  assertEquals(s.ipvs.services().get(VS), {
    address: "172.30.0.41",
    protocol: "tcp",
    port: 80,
    scheduler: "rr",
    flags: [],
  });
  assertEquals(reals(s), ["10.180.0.1:80 w1", "10.180.0.2:80 w1"]);
  assertEquals(s.ipset.entries("KUBE-CLUSTER-IP"), ["172.30.0.41,tcp:80"]);
  assertEquals(s.ipset.entries("KUBE-IPVS-IPS"), ["172.30.0.41"]);
  assertEquals([s.link.exists, s.link.up, [...s.link.bound]], [true, true, ["172.30.0.41"]]);
  assertEquals(
    s.iptables.rules("nat", "KUBE-SERVICES")!.includes(
      '-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 10.180.0.0/16 -j KUBE-MARK-MASQ',
    ),
    true,
  );
  assertEquals(s.iptables.rules("nat", "PREROUTING"), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  ]);
  assertEquals(s.iptables.rules("filter", "INPUT")!.length, 3);
});

Deno.test("ipvs partial sync: one endpoint change touches only that virtual server, in one batch per tool", async () => {
  const s = start();
  s.proxier.onServiceAdd(makeService("ns1", "other", (x) => x.spec!.clusterIPs = ["172.30.0.42"]));
  await s.proxier.syncNow();
  const batches = s.ipvs.batches.length;
  s.proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1", (x) => x.endpoints = [ep("10.180.0.1"), ep("10.180.0.2")]),
    makeEndpointSlice(
      "ns1",
      "svc1",
      (x) => x.endpoints = [ep("10.180.0.1"), ep("10.180.0.2"), ep("10.180.0.3")],
    ),
  );
  await s.proxier.syncNow();
  assertEquals(s.ipvs.batches.slice(batches), [["-a -t 172.30.0.41:80 -r 10.180.0.3:80 -m -w 1"]]);
  assertEquals(s.ipset.batches.at(-1), []);
});

Deno.test("ipvs graceful termination: a removed TCP endpoint drains at weight 0 and goes once its connections are gone", async () => {
  const s = start();
  await s.proxier.syncNow();
  s.ipvs.setConnections(VS, "10.180.0.2:80", 1, 0);
  s.proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (x) => x.endpoints = [ep("10.180.0.1")]),
  );
  await s.proxier.syncNow();
  assertEquals(reals(s), ["10.180.0.1:80 w1", "10.180.0.2:80 w0"], "drained, still there");
  await s.proxier.syncNow(); // a periodic sync: the connection is still open
  assertEquals(reals(s), ["10.180.0.1:80 w1", "10.180.0.2:80 w0"]);
  s.ipvs.setConnections(VS, "10.180.0.2:80", 0, 0);
  await s.proxier.syncNow();
  assertEquals(reals(s), ["10.180.0.1:80 w1"], "gone once idle");
  // The bound: a connection that never closes is cut after GRACEFUL_TERMINATION_MAX_MS.
  s.proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice("ns1", "svc1", (x) => x.endpoints = []),
  );
  await s.proxier.syncNow();
  s.ipvs.setConnections(VS, "10.180.0.1:80", 5, 5);
  await s.clock.advance(GRACEFUL_TERMINATION_MAX_MS);
  await s.proxier.syncNow();
  assertEquals(reals(s), []);
});

Deno.test("ipvs: an endpoint that comes back while draining gets its weight back", async () => {
  const s = start();
  await s.proxier.syncNow();
  s.ipvs.setConnections(VS, "10.180.0.2:80", 1, 0);
  const one = makeEndpointSlice("ns1", "svc1", (x) => x.endpoints = [ep("10.180.0.1")]);
  const two = makeEndpointSlice("ns1", "svc1", (x) => x.endpoints = [ep("10.180.0.1"), ep("10.180.0.2")]);
  s.proxier.onEndpointSliceUpdate(two, one);
  await s.proxier.syncNow();
  s.proxier.onEndpointSliceUpdate(one, two);
  await s.proxier.syncNow();
  assertEquals(reals(s), ["10.180.0.1:80 w1", "10.180.0.2:80 w1"]);
  s.ipvs.setConnections(VS, "10.180.0.2:80", 0, 0);
  await s.proxier.syncNow();
  assertEquals(reals(s), ["10.180.0.1:80 w1", "10.180.0.2:80 w1"], "not deleted later");
});

Deno.test("ipvs: a UDP endpoint removed goes at once, with its conntrack entries", async () => {
  const s = ipvsSetup();
  const udp = (x: { spec?: { ports?: Array<{ protocol?: string }> } }) => x.spec!.ports![0].protocol = "UDP";
  s.proxier.onServiceAdd(makeService("ns1", "dns", (x) => udp(x as never)));
  const slice = (ips: string[]) =>
    makeEndpointSlice("ns1", "dns", (x) => {
      x.ports![0].protocol = "UDP";
      x.endpoints = ips.map((ip) => ep(ip));
    });
  s.proxier.onEndpointSliceAdd(slice(["10.180.0.1", "10.180.0.2"]));
  s.proxier.onServicesSynced();
  s.proxier.onEndpointSlicesSynced();
  await s.proxier.syncNow();
  s.conntrack.add("udp", "10.180.5.5:4000", "172.30.0.41:80", "10.180.0.2:80");
  s.proxier.onEndpointSliceUpdate(slice(["10.180.0.1", "10.180.0.2"]), slice(["10.180.0.1"]));
  await s.proxier.syncNow();
  assertEquals(reals(s, "UDP/172.30.0.41:80"), ["10.180.0.1:80 w1"]);
  assertEquals(s.conntrack.flows, [], "the flow to the removed UDP real server is gone");
});

Deno.test("ipvs: a service without endpoints is REJECTed by a rule of its own in upstream's KUBE-IPVS-FILTER, in no set of ours; a set an older layout made goes at the full sync", async () => {
  const s = start([]);
  await s.ipset.restore([
    "create KUBE-IPVS-NO-ENDPOINTS hash:ip,port family inet hashsize 1024 maxelem 65536",
  ]);
  await s.proxier.syncNow();
  assertEquals(reals(s), []);
  assertEquals(
    s.iptables.rules("filter", "KUBE-IPVS-FILTER")![0],
    '-d 172.30.0.41/32 -p tcp -m tcp --dport 80 -m comment --comment "kube-proxy-deno: no endpoints" -m conntrack --ctstate NEW -j REJECT',
  );
  assertEquals(
    [...(await s.ipset.save()).keys()].filter((n) => !n.startsWith("KUBE-") || n.includes("IPVS-NO")),
    [],
  );
});

Deno.test("ipvs full sync: virtual servers that are not ours stay; ours that no service wants go", async () => {
  const s = start();
  s.ipvs.addForeign({ address: "10.99.9.9", protocol: "tcp", port: 80, scheduler: "wlc", flags: [] });
  s.ipvs.addForeign({ address: "172.30.0.99", protocol: "tcp", port: 80, scheduler: "rr", flags: [] });
  await s.link.ensure();
  await s.link.apply(["172.30.0.99"], []); // bound on kube-ipvs0: a leftover of ours
  await s.proxier.syncNow();
  assertEquals([...s.ipvs.services().keys()].sort(), ["TCP/10.99.9.9:80", VS]);
  assertEquals([...s.link.bound], ["172.30.0.41"]);
});

Deno.test("ipvs: NodePorts on the node's addresses, kube-router's scheduler annotation, ClientIP affinity", async () => {
  const s = ipvsSetup();
  s.proxier.onServiceAdd(makeService("ns1", "np", (x) => {
    x.spec!.type = "NodePort";
    x.spec!.ports![0].nodePort = 30080;
    x.spec!.sessionAffinity = "ClientIP";
    x.metadata!.annotations = {
      "kube-router.io/service.scheduler": "sh",
      "kube-router.io/service.schedflags": "flag-1,flag-2",
    };
  }));
  s.proxier.onServicesSynced();
  s.proxier.onEndpointSlicesSynced();
  await s.proxier.syncNow();
  assertEquals(s.ipvs.services().get(`TCP/${NODE_IP}:30080`), {
    address: NODE_IP,
    protocol: "tcp",
    port: 30080,
    scheduler: "sh",
    flags: ["flag-1", "flag-2"],
    persistentTimeout: 10800,
  });
  assertEquals(s.ipset.entries("KUBE-NODE-PORT-TCP"), ["30080"]);
  assertEquals([...s.link.bound], ["172.30.0.41"], "node addresses are never bound on kube-ipvs0");
});

Deno.test("ipvs: a failed batch is counted and the next sync re-reads the kernel and reconciles", async () => {
  const s = start();
  await s.proxier.syncNow();
  s.ipvs.failAtLine = 0;
  s.proxier.onEndpointSliceUpdate(
    makeEndpointSlice("ns1", "svc1"),
    makeEndpointSlice(
      "ns1",
      "svc1",
      (x) => x.endpoints = [ep("10.180.0.1"), ep("10.180.0.2"), ep("10.180.0.3")],
    ),
  );
  await assertRejects(() => s.proxier.syncNow(), IpvsError);
  assertEquals(reals(s).length, 2, "the failed line did not apply");
  await s.proxier.syncNow();
  assertEquals(reals(s), ["10.180.0.1:80 w1", "10.180.0.2:80 w1", "10.180.0.3:80 w1"]);
  // An ipvsadm failure is no iptables-restore failure: upstream counts only those, by that name.
  const page = await s.metrics.registry.metrics();
  assertEquals(page.match(/^kubeproxy_sync_proxy_rules_iptables_restore_failures_total\{.*$/m), null);
  assertEquals(
    page.match(/^kubeproxy_sync_proxy_rules_failures_total\{.*$/m)?.[0],
    'kubeproxy_sync_proxy_rules_failures_total{ip_family="IPv4"} 1',
  );
});

Deno.test("ipvs: a failed iptables-restore is counted under upstream's iptables names", async () => {
  const s = start();
  s.iptables.failNextRestore = "line 3 failed";
  await assertRejects(() => s.proxier.syncNow(), RestoreError);
  const page = await s.metrics.registry.metrics();
  assertEquals(
    page.match(/^kubeproxy_sync_proxy_rules_iptables_(partial_)?restore_failures_total\{.*$/gm),
    ['kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"} 1'],
    "a full sync's failure is no partial one",
  );
});

Deno.test("ipvs: per-virtual-server IPVS counters on /metrics, labelled with the Service", async () => {
  const s = start();
  await s.proxier.syncNow();
  s.ipvs.setStats(VS, { connections: 7, packetsIn: 70, packetsOut: 60, bytesIn: 7000, bytesOut: 9000 });
  s.ipvs.addForeign({ address: "10.99.9.9", protocol: "tcp", port: 80, scheduler: "wlc", flags: [] });
  const text = await s.metrics.registry.metrics();
  const labels = 'namespace="ns1",service="svc1",port="80",protocol="tcp",address="172.30.0.41"';
  for (
    const [name, v] of [
      ["connections", 7],
      ["packets_in", 70],
      ["packets_out", 60],
      ["bytes_in", 7000],
      ["bytes_out", 9000],
    ]
  ) {
    assert(text.includes(`kubeproxy_ipvs_service_${name}_total{${labels}} ${v}\n`), `${name}: ${text}`);
  }
  assert(!text.includes("10.99.9.9"), "a virtual server that is not ours is not reported");
});

Deno.test("ipvs: hostile input reaches no batch; the good service still works", async () => {
  const s = ipvsSetup();
  s.proxier.onServiceAdd(makeService("ns1", "good"));
  s.proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "good", (x) => x.endpoints = [ep("10.180.0.1")]));
  for (const [i, h] of HOSTILE.entries()) {
    s.proxier.onServiceAdd(makeService("ns1", `name${i}`, (x) => x.metadata!.name = h));
    s.proxier.onServiceAdd(makeService("ns1", `ip${i}`, (x) => x.spec!.clusterIPs = [h]));
    s.proxier.onServiceAdd(makeService("ns1", `ann${i}`, (x) => {
      x.spec!.clusterIPs = [`172.30.1.${i + 1}`];
      x.metadata!.annotations = {
        "kube-router.io/service.scheduler": h,
        "kube-router.io/service.schedflags": h,
      };
      x.spec!.externalIPs = [h, "192.168.99.9"];
      x.spec!.type = "LoadBalancer";
      x.spec!.loadBalancerSourceRanges = [h];
      x.status = { loadBalancer: { ingress: [{ ip: h }, { ip: "192.168.99.50" }] } };
    }));
    s.proxier.onEndpointSliceAdd(
      makeEndpointSlice("ns1", `ann${i}`, (x) => x.endpoints = [ep(h), ep("10.180.9.9")]),
    );
  }
  s.proxier.onServicesSynced();
  s.proxier.onEndpointSlicesSynced();
  await s.proxier.syncNow();
  const texts = [
    ...s.ipvs.batches.flat(),
    ...s.ipset.batches.flat(),
    ...s.iptables.restores,
    ...s.link.batches.flat(2),
  ].join("\n");
  for (const h of HOSTILE.filter((h) => h !== "-j ACCEPT")) {
    assert(!texts.includes(h), `hostile text leaked: ${JSON.stringify(h.slice(0, 40))}`);
  }
  for (const line of s.ipvs.batches.flat()) {
    assert(/^-[AEDaed] (-t|-u|--sctp-service) [0-9a-f.:[\]]+ ?[-a-z0-9,.:[\] ]*$/.test(line), line);
  }
  for (const line of s.ipset.batches.flat()) {
    assert(/^(create|add|del) KUBE-[A-Z0-9-]+ [-a-z0-9,.:/ ]+$/.test(line), line);
  }
  assertEquals(reals(s), ["10.180.0.1:80 w1"], "the good service works");
  assertEquals(s.ipvs.services().get("TCP/172.30.1.1:80")?.scheduler, "rr", "a bad annotation falls back");
  assert(s.log.messages("warn").some((m) => m.includes("kube-router.io/service.scheduler")));
});

Deno.test("ipvs IPv6: the IPv6 proxier programs [addr]:port virtual servers and the KUBE-6- sets", async () => {
  const s = ipvsSetup({
    family: "IPv6",
    nodeIPs: ["fd00:99::2"],
    localDetection: { mode: "ClusterCIDR", clusterCIDRs: ["fd00:180::/64"] },
  });
  s.proxier.onServiceAdd(makeService("ns1", "v6", (x) => {
    x.spec!.clusterIP = "fd00:30::41";
    x.spec!.clusterIPs = ["fd00:30::41"];
    x.spec!.type = "NodePort";
    x.spec!.ports![0].nodePort = 30090;
  }));
  s.proxier.onEndpointSliceAdd(makeEndpointSlice("ns1", "v6", (x) => {
    x.addressType = "IPv6";
    x.endpoints = [ep("fd00:180::1"), ep("fd00:180::2")];
  }));
  s.proxier.onServicesSynced();
  s.proxier.onEndpointSlicesSynced();
  await s.proxier.syncNow();
  assertEquals(reals(s, "TCP/[fd00:30::41]:80"), ["fd00:180::1:80 w1", "fd00:180::2:80 w1"]);
  assertEquals(
    s.ipvs.services().has("TCP/[fd00:99::2]:30090"),
    true,
    "the NodePort on the node's IPv6 address",
  );
  assertEquals(s.ipset.entries("KUBE-6-CLUSTER-IP"), ["fd00:30::41,tcp:80"]);
  assertEquals(s.ipset.entries("KUBE-6-NODE-PORT-TCP"), ["30090"]);
  assertEquals(s.ipset.entries("KUBE-CLUSTER-IP"), undefined, "the IPv4 sets are the IPv4 proxier's");
  assertEquals([...s.link.bound], ["fd00:30::41"]);
  assert(
    s.iptables.rules("nat", "KUBE-SERVICES")!.some((r) =>
      r.includes("--match-set KUBE-6-CLUSTER-IP dst,dst ! -s fd00:180::/64")
    ),
  );
});

Deno.test("ipvs golden: the representative services' full sync batches", async () => {
  const s = ipvsSetup({ nodeIPs: NODE_A.ips });
  feed(s.proxier, { node: NODE_A, objects: REPRESENTATIVE });
  await s.proxier.syncNow();
  const text = [
    "# ipvsadm -R",
    ...s.ipvs.batches[0],
    "# ipset restore -exist",
    ...s.ipset.batches[0],
    "# ip -batch (kube-ipvs0)",
    ...s.link.batches[0][0].map((ip) => `addr add ${ip}`),
    "# iptables-restore --noflush",
    s.iptables.restores[0],
  ].join("\n");
  await assertGolden("ipvs_golden.txt", text);
});

Deno.test("ipvs detect-local-mode by interface: the input interface decides masquerading", async () => {
  for (
    const [localDetection, local, rule] of [
      [{ mode: "BridgeInterface", clusterCIDRs: [], bridgeInterface: "cbr0" }, "cbr0", "! -i cbr0"],
      [{ mode: "InterfaceNamePrefix", clusterCIDRs: [], interfaceNamePrefix: "veth" }, "veth7", "! -i veth+"],
    ] as const
  ) {
    const s = start(["10.180.0.1"], { localDetection });
    await s.proxier.syncNow();
    assert(
      s.iptables.rules("nat", "KUBE-SERVICES")!.some((r) =>
        r.endsWith(`-m set --match-set KUBE-CLUSTER-IP dst,dst ${rule} -j KUBE-MARK-MASQ`)
      ),
      s.iptables.rules("nat", "KUBE-SERVICES")!.join("\n"),
    );
    const state = {
      rules: s.iptables,
      sets: s.ipset.lookup(),
      services: parseSave(s.ipvs.save()),
      bound: new Set(s.link.bound),
    };
    const masq = (inInterface: string) =>
      traceIpvs(state, {
        src: "10.180.0.9",
        dst: "172.30.0.41",
        port: 80,
        protocol: "tcp",
        fromPod: true,
        inInterface,
      }, [NODE_IP]).masq;
    assertEquals([masq(local), masq("eth0")], [false, true], localDetection.mode);
  }
});
