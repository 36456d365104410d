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

/** `bytes` as WHATWG URL writes an IPv6 host: lowercase hex words, the first longest zero run of two or more as `::`. */
function urlForm(bytes: Uint8Array): string {
  const words = Array.from({ length: 8 }, (_, i) => bytes[2 * i] << 8 | bytes[2 * i + 1]);
  let best = -1, bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j > i ? j : i + 1;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(":");
  return best < 0 ? hex(words) : `${hex(words.slice(0, best))}::${hex(words.slice(best + bestLen))}`;
}

Deno.test("ipBytes and addressFamily: as node:net and WHATWG URL over thousands of generated near-addresses", () => {
  let seed = 7;
  const r = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)];
  const group = () =>
    pick(["0", "1", "ff", "FFFF", "0db8", "12345", "", "g", "10.0.0.1", "1.2.3", "256.1.1.1"]);
  for (let k = 0; k < 20_000; k++) {
    const groups = Array.from({ length: 1 + Math.floor(r() * 9) }, group);
    const ip = groups.map((g, i) => i > 0 && r() < 0.15 ? `:${g}` : g).join(":");
    const expected = isIPv4(ip) ? "IPv4" : isIPv6(ip) ? "IPv6" : undefined;
    assertEquals(addressFamily(ip), expected, ip);
    const bytes = ipBytes(ip);
    assertEquals(bytes?.length, expected === undefined ? undefined : expected === "IPv4" ? 4 : 16, ip);
    if (expected === "IPv6") {
      assertEquals(urlForm(bytes!), new URL(`http://[${ip}]/`).hostname.slice(1, -1), ip);
    }
  }
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
