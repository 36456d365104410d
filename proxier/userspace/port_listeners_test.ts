import { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import type { ServicePortInfo } from "../model/types.ts";
import { realClock } from "../runtime/clock.ts";
import type { Listener, ListenFn } from "../socket_proxy/listen.ts";
import type { TcpServing } from "../socket_proxy/tcp_serve.ts";
import type { UdpServing } from "../socket_proxy/udp_serve.ts";
import { assert, assertEquals } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { PortListeners } from "./port_listeners.ts";
import { PortAllocator } from "./port_range.ts";

/**
 * The kernel's port picking at its least helpful: a bind to port 0 gets the lowest free port, so a
 * port just closed is handed out again at once; a bound port cannot be bound again.
 */
class Ports {
  readonly bound = new Set<number>();
  readonly listen: ListenFn = ({ hostname, port }) => {
    let p = port;
    if (p === 0) { for (p = 40000; this.bound.has(p); p++); }
    else if (this.bound.has(p)) throw new Deno.errors.AddrInUse(`${hostname}:${p}`);
    this.bound.add(p);
    return {
      addr: { transport: "tcp", hostname, port: p },
      close: () => this.bound.delete(p),
    } as unknown as Listener;
  };
}

function info(
  name: string,
  clusterIP: string,
  nodePort = 0,
  protocol: "TCP" | "UDP" = "TCP",
): ServicePortInfo {
  return {
    name: { namespace: "ns", name, port: "", protocol },
    service: `ns/${name}`,
    clusterIP,
    port: 80,
    protocol,
    nodePort,
    externalIPs: [],
    loadBalancerIPs: [],
    loadBalancerSourceRanges: [],
    hasSourceRanges: false,
    stickyMaxAgeSeconds: 0,
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
  } as ServicePortInfo;
}

Deno.test("userspace portal ports picked by the kernel are never one Service's and another's, though the TCP workers' probes close them", () => {
  const ports = new Ports();
  const listeners = new PortListeners({
    listenAddress: "0.0.0.0",
    portals: true,
    workers: true,
    allocator: new PortAllocator({ min: 0, max: 0 }),
    listen: ports.listen,
    balancer: new RoundRobinBalancer({ clock: realClock }),
    tcp: { serve: () => {} } as unknown as TcpServing,
    udp: { serve: () => {}, dropSessionsNotIn: () => {} } as unknown as UdpServing,
    log: new MemoryLogger(),
  });
  listeners.nodePortHosts = ["192.168.0.2"];
  // Served by the workers (probed), refusing (no endpoint), with a NodePort, and UDP (a listener
  // here, kept bound): each picks its portal.
  listeners.open("ns/a:", info("a", "172.30.0.1"), "a");
  listeners.open("ns/b:", info("b", "172.30.0.2"), "b", new Set(["internal"]));
  listeners.open("ns/c:", info("c", "172.30.0.3", 30080), "c");
  listeners.open("ns/e:", info("e", "172.30.0.5", 0, "UDP"), "e");
  const portals = ["ns/a:", "ns/b:", "ns/c:", "ns/e:"].map((k) => listeners.proxyPort(k));
  assert(portals.every((p) => p >= 40000), portals.join(", "));
  assertEquals(new Set(portals).size, 4, `portal ports ${portals.join(", ")}`);
  assertEquals([...ports.bound], [portals[3]], "every probe closed; the UDP listener bound");
  // A port freed by a Service gone may serve the next one.
  listeners.close("ns/a:");
  listeners.open("ns/d:", info("d", "172.30.0.4"), "d");
  assertEquals(listeners.proxyPort("ns/d:"), portals[0]);
});
