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
