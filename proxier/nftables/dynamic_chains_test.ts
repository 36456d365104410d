import { assert, assertEquals } from "../../tests/support/assert.ts";
import { lbChainName } from "./backends.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { FakeClock } from "../runtime/clock.ts";
import { DynamicChains, STALE_DELAY_MS } from "./dynamic_chains.ts";

function setup() {
  const fake = new FakeNft();
  const clock = new FakeClock();
  const log = new MemoryLogger();
  let failures = 0;
  const chains = new DynamicChains({
    family: "IPv4",
    nft: fake.forFamily("IPv4"),
    clock,
    log,
    cleanupFailures: { inc: () => failures++ },
  });
  return { fake, clock, log, chains, failures: () => failures };
}

Deno.test("dynamic chains: a name's use begins with its first port and ends with its last; lb chains follow the uses", () => {
  const { chains } = setup();
  const began = new Set<string>();
  const two = { chains: ["lb-40", "affinity-100", "lb-sh-3", "lbc-rr-2"], affinityTimeout: 100 };
  chains.count(two, 1, began);
  chains.count({ chains: ["lb-40"], affinityTimeout: 0 }, 1, began);
  assertEquals([...began], ["lb-40", "affinity-100", "lb-sh-3", "lbc-rr-2"]);
  const names = (cluster: boolean) => chains.lbChains(cluster).map(lbChainName);
  // The precreated lb-1..lb-32 and what the ports use, each over its own map.
  assertEquals(names(false).length, 34);
  assert(
    names(false).includes("lb-40") && names(false).includes("lb-sh-3") && !names(false).includes("lbc-rr-2"),
  );
  assert(names(true).includes("lbc-rr-2") && names(true).length === 33);
  assertEquals(chains.affinityInUse(), ["affinity-100"]);
  chains.count(two, -1, began);
  assertEquals([names(false).includes("lb-40"), names(false).includes("lb-sh-3"), chains.affinityInUse()], [
    true,
    false,
    [],
  ]);
});

Deno.test("dynamic chains: an unused name is deleted once stale, a failed deletion is counted and retried", async () => {
  const { fake, clock, chains, failures, log } = setup();
  await fake.apply(
    "add table ip kube-proxy\nadd chain ip kube-proxy lb-40\nadd chain ip kube-proxy lb-3\n" +
      "add chain ip kube-proxy lb-dh-3\nadd map ip kube-proxy mh-internal/ns/web { typeof numgen random mod 1 : ip daddr . th dport; }\n" +
      "add chain ip kube-proxy mh-internal/ns/web\n" +
      "add rule ip kube-proxy mh-internal/ns/web meta l4proto { tcp, udp, sctp } th dport != 0 dnat ip to jhash ip saddr mod 251 seed 0x00000001 map @mh-internal/ns/web\n",
  );
  chains.resetFromKernel(fake.listChains("IPv4", "kube-proxy")!);
  chains.markStale();
  await chains.deleteStale();
  assertEquals(fake.transactions.length, 1, "not yet stale for long enough");
  await clock.advance(STALE_DELAY_MS);
  fake.failNext = "Device or resource busy";
  await chains.deleteStale();
  assertEquals([failures(), log.messages("warn")], [1, ["Cannot delete unused nftables chains; will retry"]]);
  assertEquals(await chains.deleteStale(), ["lb-40", "lb-dh-3", "mh-internal/ns/web"]);
  assertEquals(fake.listChains("IPv4", "kube-proxy"), ["lb-3"], "precreated lb-3 stays; the others are gone");
  assertEquals([...fake.table("IPv4", "kube-proxy")!.sets.keys()], [], "the Maglev map went with its chain");
  assertEquals(chains.inKernel("lb-40"), false);
});
