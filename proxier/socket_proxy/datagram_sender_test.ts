import { assert, assertEquals } from "../../tests/support/assert.ts";
import { DatagramSender } from "./datagram_sender.ts";

/** A datagram socket whose sends the test completes by hand. */
function fakeSocket() {
  const pending: Array<{ data: Uint8Array; done: () => void; fail: (e: Error) => void }> = [];
  const sock = {
    send: (data: Uint8Array) =>
      new Promise<number>((resolve, reject) =>
        pending.push({ data, done: () => resolve(data.length), fail: reject })
      ),
  } as unknown as Deno.DatagramConn;
  return { sock, pending };
}

const to: Deno.NetAddr = { transport: "udp", hostname: "127.0.0.1", port: 9 };

Deno.test("DatagramSender: sends without waiting until the bound, then waits for one to finish", async () => {
  const f = fakeSocket();
  const s = new DatagramSender(f.sock, () => {}, 3);
  assertEquals(s.send(new Uint8Array([1]), to), undefined);
  assertEquals(s.send(new Uint8Array([2]), to), undefined);
  const wait = s.send(new Uint8Array([3]), to);
  assertEquals(f.pending.map((p) => p.data[0]), [1, 2, 3], "all three are on the wire at once");
  let released = false;
  wait!.then(() => released = true);
  await Promise.resolve();
  assertEquals(released, false, "the caller waits while 3 are in flight");
  f.pending[0].done();
  await new Promise((r) => setTimeout(r, 0));
  assertEquals(released, true);
});

Deno.test("DatagramSender: a failed send is reported and frees its slot", async () => {
  const f = fakeSocket();
  const errors: string[] = [];
  const s = new DatagramSender(f.sock, (e) => errors.push(e.message), 1);
  const wait = s.send(new Uint8Array([1]), to);
  f.pending[0].fail(new Error("ENOBUFS"));
  await wait;
  assertEquals(errors, ["ENOBUFS"]);
  assert(s.send(new Uint8Array([2]), to) instanceof Promise, "bound 1: the next send waits again");
  f.pending[1].done();
});
