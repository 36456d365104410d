/**
 * Listening sockets that bind nothing, for socket proxies under test (the flow table's adapters):
 * they never accept or receive, and end their loops once closed.
 * @module
 */
import type { Listener, ListenFn } from "../../proxier/socket_proxy/listen.ts";

let next = 0;

/** Opens a fake listener; port 0 gets a made-up port. */
export const fakeListen: ListenFn = ({ protocol, hostname, port }): Listener => {
  let closed!: () => void;
  const done = new Promise<never>((_, reject) => closed = () => reject(new Error("closed")));
  done.catch(() => {});
  const addr = { transport: protocol === "TCP" ? "tcp" : "udp", hostname, port: port || 40000 + next++ };
  const l = {
    addr,
    close: () => closed(),
    receive: () => done,
    accept: () => done,
    [Symbol.asyncIterator]: () => ({ next: () => done }),
  };
  return l as unknown as Listener;
};
