import { assert, assertEquals } from "../tests/support/assert.ts";
import { MemoryLogger } from "../tests/support/fixtures.ts";
import { newModeDeps, proxierOptions } from "./mode_definition.ts";
import { defaultConfig } from "./options/kube_proxy_configuration.ts";
import { FakeClock } from "./runtime/clock.ts";
import { oneWayPolicy } from "./scheduler_policy.ts";

Deno.test("mode options: the families of one node share what is said of the Node; another node's proxiers do not", () => {
  const deps = () =>
    newModeDeps(defaultConfig(), {
      nodeName: "node-a",
      log: new MemoryLogger(),
      clock: new FakeClock(),
      exec: { run: () => Promise.reject(new Error("no tool runs here")) },
    });
  const d = deps();
  const schedulers = oneWayPolicy("iptables", "random");
  const [v4, v6] = (["IPv4", "IPv6"] as const).map((f) => proxierOptions(d, f, schedulers).saidOfNode);
  assert(v4 !== undefined && v4 === v6, "one set for both families");
  assert(proxierOptions(deps(), "IPv4", schedulers).saidOfNode !== v4, "a set per node's proxiers");
  assertEquals(v4.size, 0);
});
