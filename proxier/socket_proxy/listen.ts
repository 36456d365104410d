/**
 * Opening the listening sockets a socket proxy serves, behind one function tests replace.
 * @module
 */

/** A listening socket of one service port. */
export type Listener = Deno.TcpListener | Deno.DatagramConn;

/** Opens a listener for `protocol` on `hostname:port` (port 0: any free port); throws when it cannot. */
export type ListenFn = (o: { protocol: "TCP" | "UDP"; hostname: string; port: number }) => Listener;

/** The real sockets: `Deno.listen` for TCP, `Deno.listenDatagram` for UDP. */
export const denoListen: ListenFn = ({ protocol, hostname, port }) =>
  protocol === "TCP"
    ? Deno.listen({ hostname, port, transport: "tcp" })
    : Deno.listenDatagram({ hostname, port, transport: "udp" });

let nextUnbound = 0;

/**
 * Listeners that bind nothing, for a dry run (`render`, offline `explain`): they accept and receive
 * nothing, end their loops once closed, and a portal's "any port" gets a made-up one.
 */
export const unboundListen: ListenFn = ({ protocol, hostname, port }) => {
  let closed!: () => void;
  const done = new Promise<never>((_, reject) => closed = () => reject(new Error("closed")));
  done.catch(() => {});
  const addr = {
    transport: protocol === "TCP" ? "tcp" : "udp",
    hostname,
    port: port || 40000 + nextUnbound++ % 20000,
  };
  return {
    addr,
    close: () => closed(),
    receive: () => done,
    accept: () => done,
    [Symbol.asyncIterator]: () => ({ next: () => done }),
  } as unknown as Listener;
};
