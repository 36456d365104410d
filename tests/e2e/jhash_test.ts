/**
 * The kernel's jhash against `loadbalancer/jhash.ts`: `trace`, the Maglev tables and the bench
 * tell a connection's slot without the kernel, so they must compute what nft's `jhash` computes.
 * In a scratch namespace, UDP datagrams from known source ports go to addresses whose DNAT picks
 * the backend at index `jhash ... mod M seed S`; conntrack shows which index each one got.
 */
import { assertEquals } from "../support/assert.ts";
import { realKernel, sh, withNamespace } from "../support/namespace.ts";
import { Agent } from "./netns.ts";
import { nftJhash, portBytes } from "../../loadbalancer/jhash.ts";
import { ipBytes } from "../../iptables/ip.ts";

const kernel = await realKernel(["nft", "conntrack"]);

/** Index -> a backend address that encodes it (`10.200.i/256.i%256`, `fd00:200::i`). */
const backend = (v6: boolean, i: number) =>
  v6 ? `fd00:200::${i.toString(16)}` : `10.200.${i >> 8}.${i & 255}`;
const index = (v6: boolean, addr: string) =>
  v6 ? parseInt(addr.split("::")[1], 16) : Number(addr.split(".")[2]) * 256 + Number(addr.split(".")[3]);

Deno.test({
  name:
    `jhash: nft's slot for the source address (and port) is the one jhash.ts computes, IPv4 and IPv6${kernel.note}`,
  ignore: kernel.ignore,
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const m = 1021;
  const seed = (crypto.getRandomValues(new Uint32Array(1))[0]) >>> 0;
  // A port of its own for every datagram: a closed UDP socket's port is not free again at once.
  const dsts = ["10.0.0.1", "10.0.0.2", "fd00:1::1", "fd00:1::2"];
  const first = 20000 + (crypto.getRandomValues(new Uint16Array(1))[0] % 40000);
  const sends = Array.from({ length: 24 }, (_, i) => ({ dst: dsts[i % 4], sport: first + i * 37 }));
  await withNamespace(async (exec) => {
    const ns = exec.ns;
    const run = (...args: string[]) => sh("ip", ["netns", "exec", ns, ...args]);
    await run("ip", "addr", "add", "10.9.9.9/32", "dev", "lo");
    // The datagrams go out of loopback; the backends they are DNATed to are local, so each
    // datagram is delivered and its conntrack entry kept (IPv6 drops it unconfirmed otherwise).
    await run("ip", "route", "add", "10.0.0.0/24", "dev", "lo", "src", "10.9.9.9");
    await run("ip", "route", "add", "local", "10.200.0.0/16", "dev", "lo");
    await run("ip", "-6", "addr", "add", "fd00:9::9/128", "dev", "lo", "nodad");
    await run("ip", "-6", "route", "add", "fd00:1::/64", "dev", "lo", "src", "fd00:9::9");
    await run("ip", "-6", "route", "add", "local", "fd00:200::/64", "dev", "lo");
    const hex = `0x${seed.toString(16).padStart(8, "0")}`;
    const lines: string[] = [];
    for (
      const [fam, v6, port, addr] of [["ip", false, "10.0.0.1", "10.0.0.2"], [
        "ip6",
        true,
        "fd00:1::1",
        "fd00:1::2",
      ]] as const
    ) {
      const t = `${fam} t`;
      lines.push(
        `add table ${t}`,
        `add map ${t} m { typeof numgen random mod 1 : ${fam} daddr . th dport; }`,
        `add chain ${t} out { type nat hook output priority -100; policy accept; }`,
        `add rule ${t} out meta l4proto udp ${fam} daddr ${port} dnat ${fam} to jhash ${fam} saddr . th sport mod ${m} seed ${hex} map @m`,
        `add rule ${t} out meta l4proto udp ${fam} daddr ${addr} dnat ${fam} to jhash ${fam} saddr mod ${m} seed ${hex} map @m`,
      );
      const els = Array.from(
        { length: m },
        (_, i) => `${i} : ${v6 ? `[${backend(v6, i)}]` : backend(v6, i)} . 53`,
      );
      for (let i = 0; i < m; i += 500) {
        lines.push(`add element ${t} m { ${els.slice(i, i + 500).join(", ")} }`);
      }
    }
    const file = await Deno.makeTempFile({ suffix: ".nft" });
    try {
      await Deno.writeTextFile(file, lines.join("\n") + "\n");
      await run("nft", "-f", file);
    } finally {
      await Deno.remove(file);
    }
    const agent = new Agent(ns);
    try {
      for (const { dst, sport } of sends) await agent.udp(dst, 7, { srcPort: sport, timeoutMs: 20 });
    } finally {
      await agent.close();
    }
    const flows = await run("conntrack", "-L", "-p", "udp", "-f", "ipv4").then(async (v4) =>
      v4 + await run("conntrack", "-L", "-p", "udp", "-f", "ipv6")
    );
    const got = new Map<string, number>();
    for (const line of flows.split("\n")) {
      const f = /dst=(\S+) sport=(\d+) dport=7 .*?src=(\S+) dst=/.exec(line);
      if (f !== null) got.set(`${f[1]} ${f[2]}`, index(f[3].includes(":"), f[3]));
    }
    const want = new Map<string, number>();
    const v4 = Uint8Array.of(10, 9, 9, 9);
    const v6 = ipBytes("fd00:9::9")!;
    for (const { dst, sport } of sends) {
      const src = dst.includes(":") ? v6 : v4;
      const withPort = dst.endsWith("1");
      want.set(`${dst} ${sport}`, nftJhash(withPort ? [src, portBytes(sport)] : [src], m, seed));
    }
    assertEquals(got, want, `seed ${hex}, source ports from ${first}`);
  });
});
