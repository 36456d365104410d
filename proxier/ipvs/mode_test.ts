import { assert, assertEquals, assertMatch, assertRejects } from "../../tests/support/assert.ts";
import { retryStart } from "../runtime/start_retry.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { FakeClock, realClock } from "../runtime/clock.ts";
import { ModeUnavailableError } from "../runtime/errors.ts";
import { newModeDeps } from "../mode_definition.ts";
import type { EventSpec } from "../runtime/events.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";
import { IPVS_DEPRECATION, ipvsMode, ipvsSysctls } from "./mode.ts";

Deno.test("ipvs sysctls as upstream: conn_reuse_mode only on 4.1 to 5.8 kernels, strict ARP only when asked", () => {
  const keys = (strict: boolean, release: string) =>
    ipvsSysctls(strict, release).map(([k, v]) => `${k}=${v}`);
  assertEquals(keys(false, "6.1.0-56-amd64"), [
    "net.ipv4.vs.conntrack=1",
    "net.ipv4.vs.expire_nodest_conn=1",
    "net.ipv4.vs.expire_quiescent_template=1",
    "net.ipv4.ip_forward=1",
  ]);
  const reuse = (kernel: string) =>
    keys(false, kernel).filter((k) => k.startsWith("net.ipv4.vs.conn_reuse_mode"));
  assertEquals(reuse("5.4.0-150-generic"), ["net.ipv4.vs.conn_reuse_mode=0"]);
  assertEquals(reuse("5.9.0"), []);
  assertEquals(reuse("3.10.0-1160.el7"), []);
  assertEquals(keys(true, "6.1.0").slice(-2), [
    "net.ipv4.conf.all.arp_ignore=1",
    "net.ipv4.conf.all.arp_announce=2",
  ]);
});

Deno.test("ipvs mode says at start that upstream deprecated it, recommending nftables, in a log line and upstream's Event", async () => {
  const log = new MemoryLogger();
  const exec = { run: () => Promise.resolve({ code: 1, stdout: "", stderr: "no IPVS" }) };
  const posted: EventSpec[] = [];
  const deps = newModeDeps(defaultConfig(), {
    nodeName: "node-a",
    log,
    clock: new FakeClock(),
    exec,
    events: { record: (e) => posted.push(e) },
  });
  await assertRejects(() => ipvsMode.setup!(deps), ModeUnavailableError);
  assertEquals(log.messages("warn"), [IPVS_DEPRECATION]);
  assertEquals(posted.map((e) => [e.regarding.kind, e.regarding.name, e.type, e.reason, e.action, e.note]), [
    ["Node", "node-a", "Warning", "IPVSDeprecation", "ProxyModeCheck", IPVS_DEPRECATION],
  ]);
  assertMatch(IPVS_DEPRECATION, /deprecated upstream since Kubernetes 1\.35.*--proxy-mode=nftables/);
});

Deno.test("ipvs mode start: an ipvsadm that fails for a moment is tried again; a kernel without IPVS ends the start at once", async () => {
  const log = new MemoryLogger();
  const clock = new FakeClock();
  // Found by the fault schedule: one failing `ipvsadm -L` at a restart read as "no IPVS" and the
  // program exited.
  let probes = 0;
  const flaky = {
    run: (cmd: string) => {
      if (cmd === "ipvsadm" && probes++ === 0) {
        return Promise.resolve({ code: 1, stdout: "", stderr: "chaos: injected failure" });
      }
      return Promise.resolve({ code: 0, stdout: "", stderr: "" });
    },
  };
  const deps = newModeDeps(defaultConfig(), { nodeName: "node-a", log, clock, exec: flaky });
  const started = retryStart("ipvs", () => ipvsMode.setup!(deps), { log, clock: realClock });
  await started;
  assertEquals(probes, 2);
  assertEquals(log.records.filter((r) => r.msg === "A start step failed; trying again").length, 1);

  let noIpvs = 0;
  const kernel = {
    run: (cmd: string) =>
      Promise.resolve(
        cmd === "ipvsadm"
          ? (noIpvs++, {
            code: 2,
            stdout: "",
            stderr:
              "Can't initialize ipvs: Protocol not available\nAre you sure that IP Virtual Server is built in the kernel or as module?",
          })
          : { code: 0, stdout: "", stderr: "" },
      ),
  };
  const deps2 = newModeDeps(defaultConfig(), { nodeName: "node-a", log, clock, exec: kernel });
  const e = await retryStart("ipvs", () => ipvsMode.setup!(deps2), { log, clock: realClock }).catch((e) => e);
  assert(e instanceof ModeUnavailableError);
  assertMatch(e.message, /no IPVS in the kernel \(ipvsadm -L: Can't initialize ipvs/);
  assertEquals(noIpvs, 1);
});
