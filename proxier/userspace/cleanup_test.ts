import { assertEquals } from "../../tests/support/assert.ts";
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import type { IPTables } from "../../iptables/iptables.ts";
import { ensurePortalJumps, KUBE_PORTALS_CONTAINER, KUBE_PORTALS_HOST } from "./portals.ts";
import { cleanupUserspace } from "./cleanup.ts";

/** The fake, with every call that is not a read recorded. */
function recording(): { ipt: IPTables; fake: FakeIPTables; writes: string[] } {
  const fake = new FakeIPTables();
  const writes: string[] = [];
  const ipt = new Proxy(fake, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        if (!["tables", "save", "existingChains", "chainExists", "listRules"].includes(String(key))) {
          writes.push(String(key));
        }
        return v.apply(target, args);
      };
    },
  });
  return { ipt, fake, writes };
}

Deno.test("cleanupUserspace: the portal chains and their jumps go; without them it only reads", async () => {
  const { ipt, fake, writes } = recording();
  await cleanupUserspace(ipt);
  assertEquals(writes, [], "no portal chain: nothing deleted, no command run");

  await ensurePortalJumps(fake);
  assertEquals(fake.chains("nat").filter((c) => c.startsWith("KUBE-PORTALS")), [
    KUBE_PORTALS_CONTAINER,
    KUBE_PORTALS_HOST,
  ]);
  await cleanupUserspace(ipt);
  assertEquals(fake.chains("nat").filter((c) => c.startsWith("KUBE-PORTALS")), []);
  assertEquals(fake.rules("nat", "PREROUTING"), []);
  assertEquals(fake.rules("nat", "OUTPUT"), []);
});
