import { assert, assertEquals } from "../../../tests/support/assert.ts";
import { MemoryLogger } from "../../../tests/support/fixtures.ts";
import { realClock } from "../../runtime/clock.ts";
import { askHolder, type Identity, newIdentity, NodeLock, takeNodeLock } from "./node_lock.ts";

/** A lock name of this test's own (the abstract namespace is the network namespace's, shared). */
const uniqueName = () => `\0kube-proxy-deno-test-${crypto.randomUUID()}`;
const who = (mode: string): Identity => newIdentity({ mode, node: "node-a", version: "0.0.0" });

Deno.test("node lock: one holder per name; a second start learns who holds it, and the lock is free once released", async () => {
  const name = uniqueName();
  const first = NodeLock.tryTake(who("nftables"), name)!;
  assert(first !== undefined);
  const serving = first.serve(() => {});
  assertEquals(NodeLock.tryTake(who("iptables"), name), undefined);
  const holder = await askHolder({ name });
  assertEquals([holder?.mode, holder?.pid, holder?.node], ["nftables", Deno.pid, "node-a"]);
  first.release();
  await serving;
  assertEquals(await askHolder({ name }), undefined);
  const again = NodeLock.tryTake(who("iptables"), name);
  assert(again !== undefined, "released: taken again");
  again.release();
});

Deno.test("node lock: a start waits for a holder that stops by itself, refuses one that does not, and takes over when told", async () => {
  const name = uniqueName();
  const log = new MemoryLogger();
  // A holder that stops 300 ms after the second start began (a rolling update's old pod).
  const old = NodeLock.tryTake(who("nftables"), name)!;
  const serving = old.serve(() => {});
  setTimeout(() => old.release(), 300);
  const next = await takeNodeLock({ me: who("nftables"), takeOver: false, log, clock: realClock, name });
  assert(next instanceof NodeLock, "taken once the old one stopped");
  await serving;
  assertEquals(log.messages("warn"), ["Another kube-proxy-deno runs on this node; waiting for it to stop"]);
  // A holder that does not stop: refused after the wait, naming it.
  const served = next.serve(() => {});
  const refused = await takeNodeLock({
    me: who("iptables"),
    takeOver: false,
    log,
    clock: realClock,
    waitMs: 400,
    name,
  });
  assert(!(refused instanceof NodeLock) && refused.heldBy?.mode === "nftables", JSON.stringify(refused));
  // --take-over: the holder is asked, stops (as SIGTERM would), and the start takes its place.
  let askedBy: Identity | undefined;
  const taker = who("iptables");
  next.release();
  await served;
  const holder = NodeLock.tryTake(who("nftables"), name)!;
  const holding = holder.serve((by) => {
    askedBy = by;
    holder.release();
  });
  const taken = await takeNodeLock({ me: taker, takeOver: true, log, clock: realClock, waitMs: 5000, name });
  assert(taken instanceof NodeLock);
  await holding;
  assertEquals(askedBy?.instance, taker.instance);
  (taken as NodeLock).release();
});
