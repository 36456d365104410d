import { assertEquals } from "../../tests/support/assert.ts";
import { NodePortAddresses } from "./nodeport_addresses.ts";

const LOCAL = ["127.0.0.1", "192.168.0.2", "10.99.0.1", "::1", "fe80::1", "fd00::2"];
const answer = (npa: NodePortAddresses) => ({ matchAll: npa.matchAll, ips: npa.nodeIPs(LOCAL) });

Deno.test("--nodeport-addresses: one reading for every mode, as upstream's NodePortAddresses", () => {
  // Nothing configured: every address of the family, loopback only where the mode allows it.
  assertEquals(answer(new NodePortAddresses("IPv4", [], undefined)), {
    matchAll: true,
    ips: ["192.168.0.2", "10.99.0.1"],
  });
  assertEquals(answer(new NodePortAddresses("IPv4", [], undefined, true)).ips, [
    "127.0.0.1",
    "192.168.0.2",
    "10.99.0.1",
  ]);
  // IPv6: never loopback, never link-local, even when the mode allows IPv4 localhost.
  assertEquals(answer(new NodePortAddresses("IPv6", [], undefined, true)).ips, ["fd00::2"]);
  // CIDRs of the family restrict; only the other family's configured: all of this one (upstream).
  assertEquals(answer(new NodePortAddresses("IPv4", ["10.0.0.0/8", "fd00::/64"], undefined)), {
    matchAll: false,
    ips: ["10.99.0.1"],
  });
  assertEquals(answer(new NodePortAddresses("IPv6", ["10.0.0.0/8"], undefined)).matchAll, true);
  assertEquals(answer(new NodePortAddresses("IPv4", ["0.0.0.0/0", "10.0.0.0/8"], undefined)).matchAll, true);
  // primary: the Node's address once known; unknown (or loopback, upstream's stand-in): all.
  assertEquals(answer(new NodePortAddresses("IPv4", ["primary"], "10.99.0.1")), {
    matchAll: false,
    ips: ["10.99.0.1"],
  });
  assertEquals(answer(new NodePortAddresses("IPv4", ["primary"], undefined)).matchAll, true);
  assertEquals(answer(new NodePortAddresses("IPv4", ["primary"], "127.0.0.1")).matchAll, true);
  // The Node's own address counts even where this machine lacks it (render elsewhere).
  assertEquals(new NodePortAddresses("IPv4", ["primary"], "203.0.113.9").nodeIPs(LOCAL), ["203.0.113.9"]);
  // A CIDR holding 127.0.0.1 allows localhost only where the mode does.
  assertEquals(new NodePortAddresses("IPv4", ["127.0.0.0/8"], undefined, true).nodeIPs(LOCAL), ["127.0.0.1"]);
  assertEquals(new NodePortAddresses("IPv4", ["127.0.0.0/8"], undefined, false).nodeIPs(LOCAL), []);
});

Deno.test("--nodeport-addresses keywords (upstream 1.37): localhost, all, and primary combined with them", () => {
  // localhost alone: no address of the node but loopback, and loopback only where the mode serves it.
  const lo4 = new NodePortAddresses("IPv4", ["localhost"], "192.168.0.2");
  assertEquals([lo4.matchAll, lo4.nodeIPs(LOCAL), lo4.explicitLoopback], [false, [], true]);
  assertEquals(new NodePortAddresses("IPv4", ["localhost"], undefined, true).nodeIPs(LOCAL), ["127.0.0.1"]);
  const lo6 = new NodePortAddresses("IPv6", ["localhost"], undefined);
  assertEquals([lo6.matchAll, lo6.nodeIPs(LOCAL), lo6.explicitLoopback], [false, [], true]);
  // primary,localhost: the primary address, and loopback asked for explicitly.
  const both = new NodePortAddresses("IPv4", ["primary", "localhost"], "10.99.0.1");
  assertEquals([both.nodeIPs(LOCAL), both.explicitLoopback], [["10.99.0.1"], true]);
  // all: every address; it holds loopback but does not ask for it (as upstream's ContainsExplicitLoopback).
  const all = new NodePortAddresses("IPv4", ["all"], undefined);
  assertEquals([all.matchAll, all.nodeIPs(LOCAL), all.explicitLoopback], [
    true,
    ["192.168.0.2", "10.99.0.1"],
    false,
  ]);
  assertEquals(new NodePortAddresses("IPv6", ["all"], undefined).nodeIPs(LOCAL), ["fd00::2"]);
  // A loopback CIDR of one family asks for that family only; 127.0.0.2/32 does not hold 127.0.0.1.
  assertEquals(new NodePortAddresses("IPv4", ["127.0.0.1/32"], undefined).explicitLoopback, true);
  assertEquals(new NodePortAddresses("IPv6", ["127.0.0.1/32"], undefined).explicitLoopback, false);
  assertEquals(new NodePortAddresses("IPv4", ["127.0.0.2/32"], undefined).explicitLoopback, false);
  assertEquals(new NodePortAddresses("IPv4", ["primary"], "10.99.0.1").explicitLoopback, false);
  // primary unknown yet beside other keywords: every address, as primary alone.
  assertEquals(new NodePortAddresses("IPv4", ["primary", "localhost"], undefined).matchAll, true);
});
