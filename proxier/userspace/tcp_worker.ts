/**
 * A TCP worker of the userspace proxy: its own event loop serving every worker-served service port
 * on listeners bound with SO_REUSEPORT, so the kernel spreads connections over the workers.
 *
 * Why: Deno serves every socket of one event loop from one task, and at about a thousand busy
 * sockets per loop some reads wait seconds while others are served at once (a plain `Deno.listen`
 * echo server shows it too). Fewer sockets per loop, on more threads, keep the tail near the mean. Each worker keeps its own rotation and passive health;
 * services with ClientIP affinity stay on the main thread, so one table pins each client.
 *
 * The proxier sends the full desired state on each sync ({@linkcode ToWorker}); the worker opens
 * and closes listeners to match and answers which ports it could not open.
 * @module
 */
/// <reference lib="deno.worker" />
import { RoundRobinBalancer } from "../../loadbalancer/round_robin.ts";
import { cidrContains } from "../model/net.ts";
import { sharedRotation } from "../../loadbalancer/shared_rotation.ts";
import type { SpliceLimits } from "../socket_proxy/tcp_copy.ts";
import { type ServingEvents, TcpServing } from "../socket_proxy/tcp_serve.ts";
import type { FromWorker, ToWorker, WorkerPort } from "./tcp_worker_protocol.ts";

const post = (m: FromWorker) => self.postMessage(m);
const events: ServingEvents = {
  dialFailed: (key, endpoint, error) => post({ type: "dialFailed", key, endpoint, error }),
  acceptFailed: (key, error, first) => post({ type: "acceptFailed", key, error, first }),
  acceptRecovered: (key, failures) => post({ type: "acceptRecovered", key, failures }),
  refused: (key, client) => post({ type: "refused", key, client }),
};
const balancer = new RoundRobinBalancer({ clock: { now: () => Date.now() } });
const open = new Map<string, { spec: string; listeners: Deno.TcpListener[] }>();
let serving: TcpServing | undefined;
let limitsSpec = "";

function closePort(key: string): void {
  for (const l of open.get(key)?.listeners ?? []) {
    try {
      l.close();
    } catch { /* already closed */ }
  }
  open.delete(key);
  balancer.remove(key);
}

function sync(
  limits: SpliceLimits | undefined,
  ports: readonly WorkerPort[],
  rotations: SharedArrayBuffer,
): Array<{ key: string; error: string }> {
  // Limits come from flags and never change in a running program; a new value applies to new connections.
  if (serving === undefined || JSON.stringify(limits) !== limitsSpec) {
    limitsSpec = JSON.stringify(limits);
    serving = new TcpServing({ balancer, limits, events });
  }
  const want = new Map(ports.map((p) => [p.key, p]));
  for (const key of [...open.keys()]) if (!want.has(key)) closePort(key);
  const failed: Array<{ key: string; error: string }> = [];
  for (const p of ports) {
    // Whom it serves is decided at accept: new ranges mean new listeners.
    const spec = JSON.stringify([p.listen, p.allow]);
    if (open.get(p.key)?.spec !== spec) {
      closePort(p.key);
      const listeners: Deno.TcpListener[] = [];
      try {
        for (const a of p.listen) {
          listeners.push(
            Deno.listen({ hostname: a.hostname, port: a.port, transport: "tcp", reusePort: true }),
          );
        }
      } catch (e) {
        for (const l of listeners) l.close();
        failed.push({ key: p.key, error: (e as Error).message });
        continue;
      }
      const entry = { spec, listeners };
      open.set(p.key, entry);
      const allow = p.allow;
      const admit = allow === undefined ? undefined : (ip: string) => allow.some((c) => cidrContains(c, ip));
      for (const l of listeners) serving.serve(l, p.key, () => open.get(p.key) === entry, admit);
    }
    balancer.update(p.key, p.endpoints, 0, { rotation: sharedRotation(rotations, p.slot), ordered: true });
  }
  return failed;
}

self.onmessage = (e: MessageEvent<ToWorker>) => {
  const m = e.data;
  if (m.type === "close") {
    for (const key of [...open.keys()]) closePort(key);
    serving?.close();
    self.close();
    return;
  }
  post({ type: "synced", id: m.id, failed: sync(m.limits, m.ports, m.rotations) });
};
