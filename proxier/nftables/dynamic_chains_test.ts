import { assertEquals } from "../../tests/support/assert.ts";
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

Deno.test("dynamic chains: a name's use begins with its first port and ends with its last; lb counts follow the uses", () => {
  const { chains } = setup();
  const began = new Set<string>();
  const two = { chains: ["lb-40", "affinity-100"], affinityTimeout: 100 };
  chains.count(two, 1, began);
  chains.count({ chains: ["lb-40"], affinityTimeout: 0 }, 1, began);
  assertEquals([...began], ["lb-40", "affinity-100"]);
  assertEquals(chains.lbCounts(false).at(-1), 40);
  assertEquals(chains.affinityInUse(), ["affinity-100"]);
  chains.count(two, -1, began);
  assertEquals([chains.lbCounts(false).at(-1), chains.affinityInUse()], [40, []]);
});

Deno.test("dynamic chains: an unused name is deleted once stale, a failed deletion is counted and retried", async () => {
  const { fake, clock, chains, failures, log } = setup();
  await fake.apply("add table ip kube-proxy\nadd chain ip kube-proxy lb-40\nadd chain ip kube-proxy lb-3\n");
  chains.resetFromKernel(fake.listChains("IPv4", "kube-proxy")!);
  chains.markStale();
  await chains.deleteStale();
  assertEquals(fake.transactions.length, 1, "not yet stale for long enough");
  await clock.advance(STALE_DELAY_MS);
  fake.failNext = "Device or resource busy";
  await chains.deleteStale();
  assertEquals([failures(), log.messages("warn")], [1, ["Cannot delete unused nftables chains; will retry"]]);
  await chains.deleteStale();
  assertEquals(fake.listChains("IPv4", "kube-proxy"), ["lb-3"], "precreated lb-3 stays; lb-40 is gone");
  assertEquals(chains.inKernel("lb-40"), false);
});
