import { assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import type { V1Service } from "@kubernetes/client-node";
import { makeService } from "../../tests/support/fixtures.ts";
import { ValidationError } from "../runtime/errors.ts";
import { SCHEDULERS, servicePorts } from "./service_port.ts";
import { KERNEL_SCHEDULERS } from "../../iptables/testing/fake_ipvsadm.ts";

Deno.test("servicePorts builds one entry per port with upstream's names", () => {
  const svc = makeService("ns1", "svc1", (s) => {
    s.spec!.type = "NodePort";
    s.spec!.ports = [
      { name: "p80", port: 80, protocol: "TCP", nodePort: 30080 },
      { name: "dns", port: 53, protocol: "UDP", nodePort: 30053 },
    ];
    s.spec!.externalIPs = ["192.168.99.11", "fd00::1"];
    s.spec!.sessionAffinity = "ClientIP";
  });
  const { ports, warnings } = servicePorts(svc, "IPv4");
  assertEquals(warnings, []);
  assertEquals(ports.map((p) => [p.name.port, p.protocol, p.port, p.nodePort]), [
    ["p80", "TCP", 80, 30080],
    ["dns", "UDP", 53, 30053],
  ]);
  assertEquals(ports[0].externalIPs, ["192.168.99.11"]);
  assertEquals(ports[0].stickyMaxAgeSeconds, 10800);
  assertEquals(ports[0].service, "ns1/svc1");
});

Deno.test("servicePorts returns nothing for headless, ExternalName and other-family services", () => {
  assertEquals(servicePorts(makeService("a", "b", (s) => s.spec!.clusterIP = "None"), "IPv4").ports, []);
  assertEquals(
    servicePorts(
      makeService("a", "b", (s) => {
        s.spec!.clusterIP = "None";
        s.spec!.clusterIPs = ["None"];
      }),
      "IPv4",
    ).ports,
    [],
  );
  assertEquals(servicePorts(makeService("a", "b", (s) => s.spec!.type = "ExternalName"), "IPv4").ports, []);
  assertEquals(servicePorts(makeService("a", "b"), "IPv6").ports, []);
});

Deno.test("servicePorts picks the cluster IP of the asked family (dual-stack)", () => {
  const svc = makeService("a", "b", (s) => s.spec!.clusterIPs = ["172.30.0.41", "fd00:30::41"]);
  assertEquals(servicePorts(svc, "IPv6").ports[0].clusterIP, "fd00:30::41");
  assertEquals(servicePorts(svc, "IPv4").ports[0].clusterIP, "172.30.0.41");
});

Deno.test("servicePorts rejects each malformed field, naming the object and the field", () => {
  const cases: Array<[string, (s: V1Service) => void]> = [
    ["metadata.name", (s) => s.metadata!.name = "Bad Name"],
    ["metadata.name", (s) => s.metadata!.name = "x".repeat(64)],
    ["metadata.namespace", (s) => s.metadata!.namespace = "ns\n-j ACCEPT"],
    ["spec.clusterIPs[0]", (s) => s.spec!.clusterIPs = ["172.30.0.999"]],
    ["spec.clusterIPs[0]", (s) => s.spec!.clusterIPs = ["172.30.0.41 -j ACCEPT"]],
    ["spec.clusterIPs[0]", (s) => s.spec!.clusterIPs = ["010.1.1.1"]],
    ["spec.ports[0].port", (s) => s.spec!.ports![0].port = 0],
    ["spec.ports[0].port", (s) => s.spec!.ports![0].port = 70000],
    ["spec.ports[0].port", (s) => delete (s.spec!.ports![0] as { port?: number }).port],
    ["spec.ports[0].port", (s) => s.spec!.ports![0].port = "80" as unknown as number],
    ["spec.ports[0].protocol", (s) => s.spec!.ports![0].protocol = "ICMP"],
    ["spec.ports[0].name", (s) => s.spec!.ports![0].name = "a b"],
    ["spec.ports[0].nodePort", (s) => {
      s.spec!.type = "NodePort";
      s.spec!.ports![0].nodePort = 65536;
    }],
    ["spec.type", (s) => s.spec!.type = "Bogus"],
    ["spec.sessionAffinity", (s) => s.spec!.sessionAffinity = "Cookie"],
    ["spec.sessionAffinityConfig.clientIP.timeoutSeconds", (s) => {
      s.spec!.sessionAffinity = "ClientIP";
      s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: 0 } };
    }],
    ["spec.ports", (s) => delete s.spec!.ports],
    ["spec.ports[1].name", (s) => s.spec!.ports!.push({ name: "p80", port: 81, protocol: "TCP" })],
  ];
  for (const [field, mutate] of cases) {
    const err = assertThrows(() => servicePorts(makeService("ns1", "svc1", mutate), "IPv4"), ValidationError);
    assertEquals((err as ValidationError).field, field);
    if (field.startsWith("spec")) assertEquals((err as ValidationError).object, 'Service "ns1/svc1"');
  }
});

Deno.test("servicePorts skips bad external IPs, LB IPs and source ranges with warnings", () => {
  const svc = makeService("ns1", "lb", (s) => {
    s.spec!.type = "LoadBalancer";
    s.spec!.ports![0].nodePort = 30001;
    s.spec!.externalIPs = ["192.168.99.1", "1.2.3", "1.2.3.4\n-A INPUT -j ACCEPT"];
    s.spec!.loadBalancerSourceRanges = ["192.168.99.0/24", "10.0.0.0/33", "nonsense", " 10.1.0.0/16 "];
    s.status = {
      loadBalancer: {
        ingress: [{ ip: "192.168.99.20" }, { ip: "bad" }, { hostname: "lb.example" }, {
          ip: "192.168.99.21",
          ipMode: "Proxy",
        }],
      },
    };
  });
  const { ports, warnings } = servicePorts(svc, "IPv4");
  assertEquals(ports[0].externalIPs, ["192.168.99.1"]);
  assertEquals(ports[0].loadBalancerIPs, ["192.168.99.20"]);
  assertEquals(ports[0].loadBalancerSourceRanges, ["192.168.99.0/24", "10.1.0.0/16"]);
  assertEquals(warnings.length, 5);
  for (const w of warnings) assertMatch(w, /^Service "ns1\/lb": skipped /);
});

Deno.test("servicePorts: source ranges only for the other family deny this family", () => {
  const svc = makeService("ns1", "lb", (s) => {
    s.spec!.type = "LoadBalancer";
    s.spec!.loadBalancerSourceRanges = ["fd00::/64"];
  });
  const p = servicePorts(svc, "IPv4").ports[0];
  assertEquals([p.hasSourceRanges, p.loadBalancerSourceRanges], [true, []]);
});

Deno.test("servicePorts: traffic policies and health check port", () => {
  const svc = makeService("ns1", "lb", (s) => {
    s.spec!.type = "LoadBalancer";
    s.spec!.externalTrafficPolicy = "Local";
    s.spec!.internalTrafficPolicy = "Local";
    s.spec!.healthCheckNodePort = 30999;
  });
  const p = servicePorts(svc, "IPv4").ports[0];
  assertEquals([p.externalPolicyLocal, p.internalPolicyLocal, p.healthCheckNodePort], [true, true, 30999]);
  // ETP Local means nothing for a ClusterIP service without external IPs.
  const c = servicePorts(makeService("a", "b", (s) => s.spec!.externalTrafficPolicy = "Local"), "IPv4");
  assertEquals(c.ports[0].externalPolicyLocal, false);
});

Deno.test("every scheduler a Service can ask for is one the IPVS kernel has (the fake's list, checked against the VM's kernel)", () => {
  assertEquals([...SCHEDULERS].filter((s) => !KERNEL_SCHEDULERS.has(s)), []);
});
