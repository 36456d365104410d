/**
 * The product's packet tracer (`iptables/trace.ts`, behind `kube-proxy-deno trace`), over
 * {@linkcode FakeIPTables}: the tests walk the fake's rules with the very code operators use.
 * @module
 */
export { type Packet, tracePacket, type TraceResult } from "../trace.ts";
