import { assertEquals } from "../../tests/support/assert.ts";
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { parseRules, tracePacket } from "./iptables_walker.ts";

const RULES = `*filter
:KUBE-SERVICES - [0:0]
-A OUTPUT -j KUBE-SERVICES
-A FORWARD -j KUBE-SERVICES
-A KUBE-SERVICES -d 172.30.0.9/32 -p tcp -m tcp --dport 80 -j REJECT
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:SVC - [0:0]
:SEP1 - [0:0]
:SEP2 - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j SVC
-A SVC ! -s 10.180.0.0/16 -d 172.30.0.1/32 -j KUBE-MARK-MASQ
-A SVC -m statistic --mode random --probability 0.5000000000 -j SEP1
-A SVC -j SEP2
-A SEP1 -s 10.180.0.1/32 -j KUBE-MARK-MASQ
-A SEP1 -p tcp -m tcp -j DNAT --to-destination 10.180.0.1:8080
-A SEP2 -s 10.180.0.2/32 -j KUBE-MARK-MASQ
-A SEP2 -p tcp -m tcp -j DNAT --to-destination 10.180.0.2:8080
COMMIT
`;

async function fake(): Promise<FakeIPTables> {
  const f = new FakeIPTables();
  await f.restoreAll(RULES, { flush: false, counters: false });
  return f;
}

Deno.test("tracer: both probabilistic branches are explored", async () => {
  const r = tracePacket(
    await fake(),
    { src: "10.180.5.5", dst: "172.30.0.1", port: 80, protocol: "tcp" },
    [],
  );
  assertEquals({ ...r, path: undefined }, {
    endpoints: ["10.180.0.1:8080", "10.180.0.2:8080"],
    reach: [
      { endpoint: "10.180.0.1:8080", probability: 0.5 },
      { endpoint: "10.180.0.2:8080", probability: 0.5 },
    ],
    masq: false,
    masqMixed: false,
    redirects: [],
    affinity: false,
    verdict: "DNAT",
    path: undefined,
    unsupported: [],
    marked: false,
  });
  // The rules hit, in order, indented by jump depth.
  assertEquals(r.path.map((s) => `${s.depth} ${s.table} ${s.rule}`), [
    "0 nat -A PREROUTING -j KUBE-SERVICES",
    "1 nat -A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j SVC",
    "2 nat -A SVC -m statistic --mode random --probability 0.5000000000 -j SEP1",
    "3 nat -A SEP1 -p tcp -m tcp -j DNAT --to-destination 10.180.0.1:8080",
    "2 nat -A SVC -j SEP2",
    "3 nat -A SEP2 -p tcp -m tcp -j DNAT --to-destination 10.180.0.2:8080",
    "0 filter -A FORWARD -j KUBE-SERVICES",
  ]);
});

Deno.test("tracer: a match it does not understand stops that path and is reported, never guessed", async () => {
  const f = await fake();
  const text = RULES.replace("-A PREROUTING -j KUBE-SERVICES", "-A PREROUTING -i eth9 -j KUBE-SERVICES");
  const r = tracePacket(
    parseRules(text),
    { src: "10.180.5.5", dst: "172.30.0.1", port: 80, protocol: "tcp" },
    [],
  );
  // An input interface match needs the packet's interface; without one the path stops.
  assertEquals([r.verdict, r.endpoints, r.unsupported], [
    "UNKNOWN",
    [],
    ["-A PREROUTING -i eth9 -j KUBE-SERVICES (input interface match -i eth9 (say which with --in-interface))"],
  ]);
  const on = (inInterface: string) =>
    tracePacket(parseRules(text), {
      src: "10.180.5.5",
      dst: "172.30.0.1",
      port: 80,
      protocol: "tcp",
      inInterface,
    }, [])
      .verdict;
  assertEquals([on("eth9"), on("eth0")], ["DNAT", "none"]);
  const owner = tracePacket(
    parseRules(
      RULES.replace(
        "-A PREROUTING -j KUBE-SERVICES",
        "-A PREROUTING -m owner --uid-owner 0 -j KUBE-SERVICES",
      ),
    ),
    { src: "10.180.5.5", dst: "172.30.0.1", port: 80, protocol: "tcp" },
    [],
  );
  assertEquals([owner.verdict, owner.unsupported], [
    "UNKNOWN",
    ["-A PREROUTING -m owner --uid-owner 0 -j KUBE-SERVICES (unsupported match --uid-owner)"],
  ]);
  // The same rules as iptables-save prints them trace like the fake holding them.
  const saved = tracePacket(parseRules(RULES), {
    src: "10.180.5.5",
    dst: "172.30.0.1",
    port: 80,
    protocol: "tcp",
  }, []);
  assertEquals(
    saved,
    tracePacket(f, { src: "10.180.5.5", dst: "172.30.0.1", port: 80, protocol: "tcp" }, []),
  );
});

Deno.test("tracer: a REDIRECT (userspace portal) is reported with its port, from the host and from elsewhere", async () => {
  const f = new FakeIPTables();
  await f.restoreAll(
    `*nat
:PORTALS - [0:0]
-A PREROUTING -j PORTALS
-A OUTPUT -j PORTALS
-A PORTALS -d 172.30.0.7/32 -p udp -m udp --dport 53 -j REDIRECT --to-ports 40001
COMMIT
`,
    { flush: false, counters: false },
  );
  for (const fromHost of [false, true]) {
    const r = tracePacket(
      f,
      { src: "10.180.5.5", dst: "172.30.0.7", port: 53, protocol: "udp", fromHost },
      [],
    );
    assertEquals([r.verdict, r.redirects, r.endpoints], ["REDIRECT", [40001], []]);
  }
  const other = tracePacket(f, { src: "10.180.5.5", dst: "172.30.0.7", port: 54, protocol: "udp" }, []);
  assertEquals([other.verdict, other.redirects], ["none", []]);
});

Deno.test("tracer: masquerade from outside the cluster CIDR, and hairpin on one path only", async () => {
  const f = await fake();
  assertEquals(
    tracePacket(f, { src: "192.168.0.10", dst: "172.30.0.1", port: 80, protocol: "tcp" }, []).masq,
    true,
  );
  const hairpin = tracePacket(f, { src: "10.180.0.1", dst: "172.30.0.1", port: 80, protocol: "tcp" }, []);
  assertEquals([hairpin.masq, hairpin.masqMixed], [false, true]);
});

Deno.test("tracer: protocol and port must match; filter REJECT is reported", async () => {
  const f = await fake();
  assertEquals(
    tracePacket(f, { src: "10.180.5.5", dst: "172.30.0.1", port: 80, protocol: "udp" }, []).verdict,
    "none",
  );
  assertEquals(
    tracePacket(f, { src: "10.180.5.5", dst: "172.30.0.1", port: 81, protocol: "tcp" }, []).verdict,
    "none",
  );
  assertEquals(
    tracePacket(f, { src: "10.180.5.5", dst: "172.30.0.9", port: 80, protocol: "tcp" }, []).verdict,
    "REJECT",
  );
  assertEquals(
    tracePacket(f, { src: "192.168.0.2", dst: "172.30.0.9", port: 80, protocol: "tcp", fromHost: true }, [])
      .verdict,
    "REJECT",
  );
});

Deno.test("tracer over upstream 1.36's own iptables-save of a node: each kind of Service and client", () => {
  const listing = Deno.readTextFileSync(
    new URL("../../tests/testdata/upstream-1.36/iptables-mode.iptables-save", import.meta.url),
  );
  const rules = parseRules(listing);
  const node = "192.168.77.10", pod = "10.244.250.50", outside = "203.0.113.200";
  const trace = (src: string, dst: string, port: number, o: { udp?: boolean; fromHost?: boolean } = {}) => {
    const r = tracePacket(rules, {
      src,
      dst,
      port,
      protocol: o.udp ? "udp" : "tcp",
      ...(o.fromHost ? { fromHost: true } : { inInterface: src === pod ? "veth0" : "eth0" }),
    }, [node]);
    return [r.verdict, r.endpoints.join(","), r.masq, r.affinity];
  };
  assertEquals(trace(node, "10.96.97.45", 80, { fromHost: true }), [
    "DNAT",
    "10.244.250.31:8080,10.244.9.31:8080",
    true,
    false,
  ]);
  assertEquals(trace(pod, "10.96.217.251", 53, { udp: true }), [
    "DNAT",
    "10.244.250.32:5353,10.244.9.33:5353",
    false,
    false,
  ]);
  // externalTrafficPolicy Local on the NodePort: the local endpoint, the client's address kept.
  assertEquals(trace(outside, node, 30280), ["DNAT", "10.244.250.33:8080", false, false]);
  assertEquals(trace(outside, node, 30281)[0], "DROP", "Local policy, no local endpoint");
  assertEquals(trace("192.0.2.5", "198.51.100.80", 443), [
    "DNAT",
    "10.244.250.36:8443,10.244.9.39:8443",
    true,
    false,
  ]);
  assertEquals(trace(outside, "198.51.100.80", 443)[0], "DROP", "outside loadBalancerSourceRanges");
  assertEquals(trace(pod, "10.96.32.21", 80)[0], "REJECT", "no endpoints");
  assertEquals(trace(pod, "10.96.30.162", 80)[3], true, "ClientIP affinity");
  assertEquals(trace(pod, "10.96.36.91", 80), ["DNAT", "10.244.250.34:8080", false, false]);
});
