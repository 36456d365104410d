import { assertEquals } from "../../tests/assert.ts";
import { FakeIPTables } from "./fake_iptables.ts";
import { tracePacket } from "./tracer.ts";

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
  assertEquals(r, {
    endpoints: ["10.180.0.1:8080", "10.180.0.2:8080"],
    masq: false,
    masqMixed: false,
    redirects: [],
    verdict: "DNAT",
  });
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
