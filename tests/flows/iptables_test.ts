/**
 * Packet flows through the rules the iptables proxier writes, read like a table, plus the golden
 * rule text of the representative services.
 */
import { tracePacket } from "../../iptables/testing/tracer.ts";
import { assertEquals } from "../assert.ts";
import { iptablesSetup, NODE_IP } from "../iptables_fixtures.ts";

interface Flow {
  name: string;
  src: string;
  dst: string;
  port: number;
  proto?: "tcp" | "udp" | "sctp";
  fromHost?: boolean;
  expect: string[] | "REJECT" | "DROP" | "none";
  masq?: boolean;
}

const POD = "10.180.5.5";
const OUTSIDE = "192.168.0.10";

const FLOWS: Flow[] = [
  {
    name: "ClusterIP from a pod",
    src: POD,
    dst: "172.30.0.41",
    port: 80,
    expect: ["10.180.0.1:80"],
    masq: false,
  },
  {
    name: "ClusterIP from outside the cluster CIDR is masqueraded",
    src: OUTSIDE,
    dst: "172.30.0.41",
    port: 80,
    expect: ["10.180.0.1:80"],
    masq: true,
  },
  {
    name: "ClusterIP from the host",
    src: NODE_IP,
    dst: "172.30.0.41",
    port: 80,
    fromHost: true,
    expect: ["10.180.0.1:80"],
    masq: true,
  },
  {
    name: "hairpin: the endpoint itself is masqueraded",
    src: "10.180.0.1",
    dst: "172.30.0.41",
    port: 80,
    expect: ["10.180.0.1:80"],
    masq: true,
  },
  { name: "ClusterIP wrong port", src: POD, dst: "172.30.0.41", port: 81, expect: "none" },
  {
    name: "ETP Local NodePort from outside: local endpoint only, source kept",
    src: OUTSIDE,
    dst: NODE_IP,
    port: 3001,
    expect: ["10.180.0.2:80"],
    masq: false,
  },
  {
    name: "ETP Local NodePort from a pod: short-circuit to all endpoints",
    src: POD,
    dst: NODE_IP,
    port: 3001,
    expect: ["10.180.0.2:80", "10.180.0.3:80"],
    masq: false,
  },
  {
    name: "ETP Local NodePort from the host: all endpoints, masqueraded",
    src: NODE_IP,
    dst: NODE_IP,
    port: 3001,
    fromHost: true,
    expect: ["10.180.0.2:80", "10.180.0.3:80"],
    masq: true,
  },
  {
    name: "ETP Local NodePort on localhost",
    src: "127.0.0.1",
    dst: "127.0.0.1",
    port: 3001,
    fromHost: true,
    expect: ["10.180.0.2:80", "10.180.0.3:80"],
    masq: true,
  },
  {
    name: "ETP Local external IP from outside",
    src: OUTSIDE,
    dst: "192.168.99.2",
    port: 80,
    expect: ["10.180.0.2:80"],
    masq: false,
  },
  {
    name: "ETP Local cluster IP keeps both endpoints",
    src: POD,
    dst: "172.30.0.42",
    port: 80,
    expect: ["10.180.0.2:80", "10.180.0.3:80"],
    masq: false,
  },
  {
    name: "LB IP from an admitted source",
    src: "192.168.99.5",
    dst: "192.168.99.33",
    port: 80,
    expect: ["10.180.0.4:80", "10.180.0.5:80"],
    masq: true,
  },
  {
    name: "LB IP from a source outside loadBalancerSourceRanges",
    src: "192.168.99.100",
    dst: "192.168.99.33",
    port: 80,
    expect: "DROP",
  },
  {
    name: "NodePort of a firewalled LB is not subject to source ranges",
    src: "192.168.99.100",
    dst: NODE_IP,
    port: 3003,
    expect: ["10.180.0.4:80", "10.180.0.5:80"],
    masq: true,
  },
  {
    name: "affinity service cluster IP",
    src: POD,
    dst: "172.30.0.43",
    port: 80,
    expect: ["10.180.0.4:80", "10.180.0.5:80"],
    masq: false,
  },
  {
    name: "UDP service without endpoints rejects",
    src: POD,
    dst: "172.30.0.44",
    port: 53,
    proto: "udp",
    expect: "REJECT",
  },
  {
    name: "UDP service without endpoints rejects the host too",
    src: NODE_IP,
    dst: "172.30.0.44",
    port: 53,
    proto: "udp",
    fromHost: true,
    expect: "REJECT",
  },
  { name: "ITP Local without local endpoints drops", src: POD, dst: "172.30.0.45", port: 80, expect: "DROP" },
  {
    name: "SCTP with only a serving+terminating endpoint",
    src: POD,
    dst: "172.30.0.46",
    port: 7777,
    proto: "sctp",
    expect: ["10.180.0.7:7777"],
    masq: false,
  },
  {
    name: "ETP Local LB without local endpoints drops external traffic",
    src: OUTSIDE,
    dst: "192.168.99.77",
    port: 80,
    expect: "DROP",
  },
  {
    name: "ETP Local LB without local endpoints: NodePort drops too",
    src: OUTSIDE,
    dst: NODE_IP,
    port: 3007,
    expect: "DROP",
  },
  {
    name: "ETP Local LB without local endpoints: pods still reach it",
    src: POD,
    dst: "192.168.99.77",
    port: 80,
    expect: ["10.180.0.9:80"],
    masq: false,
  },
  {
    name: "ETP Local LB cluster IP unaffected",
    src: POD,
    dst: "172.30.0.47",
    port: 80,
    expect: ["10.180.0.9:80"],
    masq: false,
  },
];

Deno.test("iptables flows: each packet reaches the endpoints upstream kube-proxy would send it to", async () => {
  const { fake, proxier } = iptablesSetup();
  await proxier.syncNow();
  for (const f of FLOWS) {
    const r = tracePacket(fake, {
      src: f.src,
      dst: f.dst,
      port: f.port,
      protocol: f.proto ?? "tcp",
      fromHost: f.fromHost,
    }, [NODE_IP]);
    if (Array.isArray(f.expect)) {
      assertEquals([r.endpoints, r.masq, r.masqMixed], [f.expect, f.masq ?? false, false], f.name);
    } else {
      assertEquals([r.verdict, r.endpoints], [f.expect, []], f.name);
    }
  }
});

Deno.test("iptables flows: --masquerade-all masquerades pod traffic to a cluster IP", async () => {
  const { fake, proxier } = iptablesSetup({ masqueradeAll: true });
  await proxier.syncNow();
  assertEquals(
    tracePacket(fake, { src: POD, dst: "172.30.0.41", port: 80, protocol: "tcp" }, [NODE_IP]).masq,
    true,
  );
});

Deno.test("iptables flows: --iptables-localhost-nodeports=false refuses NodePorts on 127.0.0.1", async () => {
  const { fake, proxier } = iptablesSetup({ localhostNodePorts: false });
  await proxier.syncNow();
  const r = tracePacket(fake, {
    src: "127.0.0.1",
    dst: "127.0.0.1",
    port: 3001,
    protocol: "tcp",
    fromHost: true,
  }, [NODE_IP]);
  assertEquals(r.verdict, "none");
});

Deno.test("iptables flows: --nodeport-addresses limits which addresses answer", async () => {
  const { fake, proxier } = iptablesSetup({ nodePortAddresses: ["192.168.0.0/24"] });
  await proxier.syncNow();
  const pkt = { src: OUTSIDE, port: 3003, protocol: "tcp" as const };
  assertEquals(tracePacket(fake, { ...pkt, dst: NODE_IP }, [NODE_IP, "10.99.0.1"]).endpoints.length, 2);
  assertEquals(tracePacket(fake, { ...pkt, dst: "10.99.0.1" }, [NODE_IP, "10.99.0.1"]).verdict, "none");
});

Deno.test("iptables golden: the representative services' rules", async () => {
  const { proxier } = iptablesSetup();
  await proxier.syncNow();
  const expected = await Deno.readTextFile(new URL("../testdata/iptables_golden.txt", import.meta.url));
  if (Deno.env.get("UPDATE_GOLDEN") === "1") {
    await Deno.writeTextFile(
      new URL("../testdata/iptables_golden.txt", import.meta.url),
      proxier.lastRestore,
    );
  }
  assertEquals(proxier.lastRestore.split("\n"), expected.split("\n"));
});
