import { BlockList, isIPv4, isIPv6 } from "node:net";
import { assertEquals } from "../tests/support/assert.ts";
import { addressFamily, inCIDR, ipBytes } from "./ip.ts";

/** Literals at the edges of both grammars: compressions, IPv4 tails, leading zeros, garbage. */
const LITERALS = [
  "0.0.0.0",
  "10.0.0.1",
  "255.255.255.255",
  "256.0.0.1",
  "01.2.3.4",
  "1.2.3",
  "1.2.3.4.5",
  "1.2.3.4 ",
  " 1.2.3.4",
  "1..2.3",
  "::",
  "::1",
  "1::",
  "fd00:10:96::a",
  "FD00:10:96::A",
  "2001:db8:0:0:0:0:2:1",
  "2001:db8::2:1",
  "2001:db8:0:0:0:0:0:2:1",
  "2001:db8::2::1",
  "1:2:3:4:5:6:7::",
  "::2:3:4:5:6:7:8",
  "1:2:3:4:5:6:7:8::",
  ":1:2:3:4:5:6:7",
  "1:2:3:4:5:6:7:",
  "::ffff:10.0.0.1",
  "::ffff:10.0.0.256",
  "64:ff9b::192.0.2.33",
  "1:2:3:4:5:6:1.2.3.4",
  "1:2:3:4:5:6:7:1.2.3.4",
  "1.2.3.4::",
  "12345::1",
  "g::1",
  ":::",
  "",
  "fe80::1%eth0",
  "1:2:3:4:5:6:7:8",
  "0:0:0:0:0:0:0:0",
];

Deno.test("ipBytes: the same literals as node:net (which it replaces), zones refused", () => {
  for (const ip of LITERALS) {
    const expected = isIPv4(ip) ? "IPv4" : isIPv6(ip) && !ip.includes("%") ? "IPv6" : undefined;
    assertEquals(addressFamily(ip), expected, ip);
  }
  assertEquals([...ipBytes("::ffff:10.0.0.1")!], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 0, 0, 1]);
  assertEquals([...ipBytes("2001:db8::2:1")!], [32, 1, 13, 184, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1]);
  assertEquals([...ipBytes("10.96.0.10")!], [10, 96, 0, 10]);
});

Deno.test("inCIDR: as node:net's BlockList on every prefix length, both families; garbage is outside", () => {
  const cases: Array<[string, string]> = [];
  for (let bits = 0; bits <= 32; bits++) {
    for (const ip of ["10.96.0.10", "10.96.255.1", "10.97.0.10", "11.0.0.0", "9.255.255.255"]) {
      cases.push([ip, `10.96.0.0/${bits}`]);
    }
  }
  for (let bits = 0; bits <= 128; bits += 3) {
    for (const ip of ["fd00:10:96::a", "fd00:10:96::ffff:1", "fd00:10:97::a", "fd01::", "::1"]) {
      cases.push([ip, `fd00:10:96::/${bits}`]);
    }
  }
  for (const [ip, cidr] of cases) {
    const [net, bits] = cidr.split("/");
    const type = net.includes(":") ? "ipv6" : "ipv4";
    const list = new BlockList();
    list.addSubnet(net, Number(bits), type);
    assertEquals(inCIDR(ip, cidr), list.check(ip, type), `${ip} in ${cidr}`);
  }
  for (
    const [ip, cidr] of [
      ["10.0.0.1", "10.0.0.0/33"],
      ["10.0.0.1", "10.0.0.0"],
      ["10.0.0.1", "10.0.0.0/"],
      [
        "10.0.0.1",
        "::/0",
      ],
      ["::1", "0.0.0.0/0"],
      ["x", "0.0.0.0/0"],
      ["10.0.0.1", "10.0.0.0/8x"],
    ]
  ) {
    assertEquals(inCIDR(ip, cidr), false, `${ip} in ${cidr}`);
  }
});
