/**
 * What this node's kernel routes a connection to an address by: the source address it picks for the
 * node's own connections, and the interface it leaves by (read only, `ip route get`). The read side
 * asks it where it speaks of a live node: `trace`'s defaults, the node client of `explain` and
 * `migrate`.
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import { ipFamily } from "../model/net.ts";
import { INTERFACE } from "../options/validation.ts";

/**
 * Returns what the kernel's route to `dst` says (`ip route get`, read only): the source address it
 * picks for a connection from this node, and the interface it leaves by (the one a packet from
 * `dst` comes in on); each undefined when there is no route or the answer lacks it.
 */
export async function route(exec: Executor, dst: string): Promise<{ src?: string; dev?: string }> {
  const r = await exec.run("ip", { args: ["-o", "route", "get", dst] }).catch(() => undefined);
  if (r === undefined || r.code !== 0) return {};
  const src = / src (\S+)/.exec(r.stdout)?.[1];
  const dev = / dev (\S+)/.exec(r.stdout)?.[1];
  return {
    src: src !== undefined && ipFamily(src) !== undefined ? src : undefined,
    dev: dev !== undefined && INTERFACE.test(dev) ? dev : undefined,
  };
}

/** Route types `ip route get` may print before the destination. */
const ROUTE_TYPES = new Set(["local", "broadcast", "multicast", "unicast", "anycast", "unreachable"]);

/**
 * Returns the source the kernel picks for this node's connections to each of `dsts` that it has a
 * route for: one `ip -batch` run for all of them (thousands of Services ask once, not once each).
 */
export async function nodeSources(exec: Executor, dsts: Iterable<string>): Promise<Map<string, string>> {
  const asked = [...new Set(dsts)].filter((d) => ipFamily(d) !== undefined);
  const out = new Map<string, string>();
  if (asked.length === 0) return out;
  const r = await exec.run("ip", {
    args: ["-o", "-force", "-batch", "-"],
    stdin: asked.map((d) => `route get ${d}\n`).join(""),
  }).catch(() => undefined);
  // `-force` goes on past a destination without a route; what it prints names each destination.
  for (const line of r?.stdout.split("\n") ?? []) {
    const words = line.trim().split(/\s+/);
    const dst = ROUTE_TYPES.has(words[0]) ? words[1] : words[0];
    const src = / src (\S+)/.exec(line)?.[1];
    if (dst !== undefined && src !== undefined && ipFamily(src) !== undefined) out.set(dst, src);
  }
  return out;
}
