import { assertEquals } from "../../tests/support/assert.ts";
import { dialStaggered, DialTimeout, splitEndpoint } from "./dial.ts";

/** A connect whose attempts the test settles by hand; records the order of dials. */
function fakeConnect() {
  const calls: Array<{
    ep: string;
    resolve: (c: Deno.TcpConn) => void;
    reject: (e: Error) => void;
  }> = [];
  const closed: string[] = [];
  const connect = (o: { hostname: string; port: number }) =>
    new Promise<Deno.TcpConn>((resolve, reject) => {
      const ep = `${o.hostname}:${o.port}`;
      calls.push({ ep, resolve, reject });
    });
  const conn = (ep: string) => ({ close: () => closed.push(ep) }) as unknown as Deno.TcpConn;
  return { calls, closed, connect, conn };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("dialStaggered: a slow first attempt races the next; the late winner is kept, the loser closed", async () => {
  const f = fakeConnect();
  const failures: string[] = [];
  const eps = ["10.0.0.1:80", "10.0.0.2:80"];
  const p = dialStaggered({
    pick: (tried) => eps.find((e) => !tried.has(e)),
    staggerMs: [20, 1000],
    onFailure: (ep) => failures.push(ep),
    connect: f.connect,
  });
  await sleep(60);
  assertEquals(f.calls.map((c) => c.ep), eps, "the second endpoint is dialled beside the first");
  // The first attempt connects after its stagger: it still wins.
  f.calls[0].resolve(f.conn(eps[0]));
  const won = await p;
  assertEquals(won?.endpoint, eps[0]);
  f.calls[1].resolve(f.conn(eps[1]));
  await sleep(0);
  assertEquals(f.closed, [eps[1]], "the attempt that connected after the winner is closed");
  assertEquals(failures, []);
});

Deno.test("dialStaggered: a refusal moves on at once and is reported; all refused gives undefined", async () => {
  const f = fakeConnect();
  const failures: string[] = [];
  const eps = ["10.0.0.1:80", "10.0.0.2:80"];
  const p = dialStaggered({
    pick: (tried) => eps.find((e) => !tried.has(e)),
    staggerMs: [10_000, 10_000],
    onFailure: (ep) => failures.push(ep),
    connect: f.connect,
  });
  f.calls[0].reject(new Error("refused"));
  await sleep(0);
  assertEquals(f.calls.length, 2, "no waiting for the stagger after a refusal");
  f.calls[1].reject(new Error("refused"));
  assertEquals(await p, undefined);
  assertEquals(failures, eps);
});

Deno.test("dialStaggered: gives up after the sum of the staggers, reports the pending attempts, closes late ones", async () => {
  const f = fakeConnect();
  const failures: Error[] = [];
  const p = dialStaggered({
    pick: (tried) => tried.size === 0 ? "[fd00::1]:8080" : undefined,
    staggerMs: [20, 20],
    onFailure: (_, e) => failures.push(e),
    connect: f.connect,
  });
  assertEquals(await p, undefined);
  assertEquals(f.calls.map((c) => c.ep), ["fd00::1:8080"], "one endpoint is dialled once, not again");
  assertEquals(failures.length, 1);
  assertEquals(failures[0] instanceof DialTimeout, true);
  f.calls[0].resolve(f.conn("late"));
  await sleep(0);
  assertEquals(f.closed, ["late"]);
});

Deno.test("splitEndpoint: IPv4 and bracketed IPv6", () => {
  assertEquals(splitEndpoint("10.0.0.1:80"), { hostname: "10.0.0.1", port: 80 });
  assertEquals(splitEndpoint("[fd00::1]:8080"), { hostname: "fd00::1", port: 8080 });
});
