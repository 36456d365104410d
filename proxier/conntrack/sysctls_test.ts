import { assertEquals, assertMatch } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { FakeSysctl } from "../../iptables/testing/fake_sysctl.ts";
import {
  CONNTRACK_MAX_LIMIT,
  conntrackMax,
  NF_CONNTRACK_BUCKETS,
  NF_CONNTRACK_MAX,
  READ_ONLY_SYSFS_NOTE,
  setConntrackSysctls,
  TCP_BE_LIBERAL,
  TCP_CLOSE_WAIT,
  TCP_ESTABLISHED,
  tuneConntrack,
  UDP_STREAM_TIMEOUT,
  UDP_TIMEOUT,
} from "./sysctls.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";
import type { ConntrackConfig } from "../options/config.ts";

/** A kernel as a fresh Linux 6.x node boots: its defaults. */
function kernel(): FakeSysctl {
  return new FakeSysctl({
    [NF_CONNTRACK_MAX]: "65536",
    [NF_CONNTRACK_BUCKETS]: "16384",
    [TCP_ESTABLISHED]: "432000",
    [TCP_CLOSE_WAIT]: "60",
    [TCP_BE_LIBERAL]: "0",
    [UDP_TIMEOUT]: "30",
    [UDP_STREAM_TIMEOUT]: "120",
  });
}

const upstreamDefaults = (): ConntrackConfig => defaultConfig().conntrack;

Deno.test("conntrack max: maxPerCore x CPUs, at least min, at most 1,048,576; 0 leaves it (upstream's cases)", () => {
  const c = (maxPerCore: number | null, min: number | null) => ({ ...upstreamDefaults(), maxPerCore, min });
  assertEquals(conntrackMax(c(null, null), 8), 0);
  assertEquals(conntrackMax(c(67890, 1), 2), 135780);
  assertEquals(conntrackMax(c(1, 123456), 8), 123456);
  assertEquals(conntrackMax(c(0, 123456), 8), 0);
  assertEquals(conntrackMax(c(32768, 0), 512), CONNTRACK_MAX_LIMIT);
});

Deno.test("conntrack sysctls: upstream's defaults on a fresh node raise the table, its hash, and set the TCP timeouts", async () => {
  const s = kernel();
  const r = await setConntrackSysctls(upstreamDefaults(), { sysctl: s, cpus: 8, log: new MemoryLogger() });
  assertEquals(r.failed, []);
  assertEquals(s.writes, [
    "net.netfilter.nf_conntrack_max=262144",
    "net.netfilter.nf_conntrack_buckets=65536",
    "net.netfilter.nf_conntrack_tcp_timeout_established=86400",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait=3600",
  ]);
  // Running again finds everything in place: nothing is rewritten.
  const again = await setConntrackSysctls(upstreamDefaults(), {
    sysctl: s,
    cpus: 8,
    log: new MemoryLogger(),
  });
  assertEquals(again.written, []);
});

Deno.test("conntrack sysctls: a larger table or hash is never shrunk; the hash alone is raised when short", async () => {
  const s = kernel();
  s.values.set(NF_CONNTRACK_MAX, "1000000");
  s.values.set(NF_CONNTRACK_BUCKETS, "1024");
  const c = { ...upstreamDefaults(), tcpEstablishedTimeoutMs: 0, tcpCloseWaitTimeoutMs: 0 };
  await setConntrackSysctls(c, { sysctl: s, cpus: 8, log: new MemoryLogger() });
  assertEquals(s.writes, ["net.netfilter.nf_conntrack_buckets=65536"]);
});

Deno.test("conntrack sysctls: 0 and null leave every value; liberal and the UDP timeouts when asked", async () => {
  const s = kernel();
  const none: ConntrackConfig = {
    maxPerCore: 0,
    min: null,
    tcpEstablishedTimeoutMs: 0,
    tcpCloseWaitTimeoutMs: null,
    tcpBeLiberal: false,
    udpTimeoutMs: 0,
    udpStreamTimeoutMs: 0,
  };
  await setConntrackSysctls(none, { sysctl: s, cpus: 8, log: new MemoryLogger() });
  assertEquals(s.writes, []);
  await setConntrackSysctls(
    { ...none, tcpBeLiberal: true, udpTimeoutMs: 10_000, udpStreamTimeoutMs: 60_500 },
    { sysctl: s, cpus: 8, log: new MemoryLogger() },
  );
  assertEquals(s.writes, [
    "net.netfilter.nf_conntrack_tcp_be_liberal=1",
    "net.netfilter.nf_conntrack_udp_timeout=10",
    "net.netfilter.nf_conntrack_udp_timeout_stream=60",
  ]);
});

Deno.test("conntrack sysctls: what the kernel refuses is reported, never thrown; the rest is still set", async () => {
  // Outside the host's namespace nf_conntrack_max cannot be written; the timeouts can.
  const s = kernel();
  s.refuse.add(NF_CONNTRACK_MAX);
  s.refuse.add(NF_CONNTRACK_BUCKETS);
  const r = await setConntrackSysctls(upstreamDefaults(), { sysctl: s, cpus: 8, log: new MemoryLogger() });
  assertEquals(r.failed.length, 2);
  assertMatch(r.failed[0], /^net.netfilter.nf_conntrack_max=262144: .*Invalid argument/);
  assertEquals(s.values.get(TCP_ESTABLISHED), "86400");
  // A read-only /proc/sys (an unprivileged container): every setting is named, none is made.
  const ro = kernel();
  ro.readOnly = true;
  const r2 = await setConntrackSysctls(upstreamDefaults(), { sysctl: ro, cpus: 8, log: new MemoryLogger() });
  assertEquals(r2.failed.map((f) => f.split(":")[0]), [
    "net.netfilter.nf_conntrack_max=262144",
    "net.netfilter.nf_conntrack_buckets=65536",
    "net.netfilter.nf_conntrack_tcp_timeout_established=86400",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait=3600",
  ]);
  assertEquals(ro.writes, []);
});

Deno.test("conntrack tuning's Events: the table limits refused are upstream's readOnlySysFS with its note; timeouts refused are ours", async () => {
  const posted: Array<[string, string]> = [];
  const warn = (reason: string, note: string) => posted.push([reason, note]);
  const refused = kernel();
  refused.refuse.add(NF_CONNTRACK_MAX);
  await tuneConntrack(upstreamDefaults(), { sysctl: refused, cpus: 8, log: new MemoryLogger(), warn });
  assertEquals(posted, [["readOnlySysFS", READ_ONLY_SYSFS_NOTE]]);
  posted.length = 0;
  const readOnly = kernel();
  readOnly.readOnly = true;
  await tuneConntrack(upstreamDefaults(), { sysctl: readOnly, cpus: 8, log: new MemoryLogger(), warn });
  assertEquals(posted.map(([reason]) => reason), ["readOnlySysFS", "FailedToSetConntrack"]);
  assertMatch(
    posted[1][1],
    /^cannot modify conntrack settings, problems may arise later: net\.netfilter\.nf_conntrack_tcp_timeout_established=86400: /,
  );
  posted.length = 0;
  await tuneConntrack(upstreamDefaults(), { sysctl: kernel(), cpus: 8, log: new MemoryLogger(), warn });
  assertEquals(posted, []);
});
