/**
 * Which endpoint a packet reaches in ipvs mode: the iptables walk (nat marks, filter verdicts, with
 * `-m set` answered from the ipsets), then the virtual server IPVS holds for the destination and
 * its real servers (weight above 0) with their shares, masquerading (marked in nat, or hairpin
 * through the loop-back set). For the tests' fakes and for `trace --proxy-mode=ipvs`.
 * @module
 */
import { addressFamily } from "./ip.ts";
import { type IpvsService, vsKey } from "./ipvs.ts";
import { type Packet, type RuleSource, type SetLookup, tracePacket, type TraceResult } from "./trace.ts";

/** What the ipvs mode's datapath consists of, as read from the kernel (or a rendered file). */
export interface IpvsState {
  readonly rules: RuleSource;
  readonly sets: SetLookup;
  readonly services: readonly IpvsService[];
  /** Addresses on kube-ipvs0 (local to the node, as its own). */
  readonly bound: ReadonlySet<string>;
}

/** Traces `pkt` through the ipvs mode's state; `nodeIPs` are the node's own addresses. */
export function traceIpvs(state: IpvsState, pkt: Packet, nodeIPs: readonly string[]): TraceResult {
  const local = [...nodeIPs, ...state.bound];
  const r = tracePacket(state.rules, pkt, local, state.sets);
  if (r.verdict !== "none") return r;
  const isLocal = local.includes(pkt.dst) ||
    (addressFamily(pkt.dst) === "IPv4" ? pkt.dst.startsWith("127.") : pkt.dst === "::1");
  const key = vsKey({ address: pkt.dst, protocol: pkt.protocol, port: pkt.port });
  const svc = isLocal ? state.services.find((s) => vsKey(s.vs) === key) : undefined;
  if (svc === undefined) return r;
  const target = `${pkt.protocol === "sctp" ? "--sctp-service" : pkt.protocol === "tcp" ? "-t" : "-u"} ${
    key.slice(key.indexOf("/") + 1)
  }`;
  const persistence = svc.vs.persistentTimeout === undefined ? "" : ` -p ${svc.vs.persistentTimeout}`;
  const step = {
    table: "ipvs" as const,
    chain: key,
    rule: `-A ${target} -s ${svc.vs.scheduler}${persistence}`,
    depth: 0,
  };
  const live = svc.reals.filter((x) => x.weight > 0);
  const total = live.reduce((n, x) => n + x.weight, 0);
  if (live.length === 0) {
    // IPVS accepts the connection and has nowhere to send it: it times out.
    return { ...r, path: [...r.path, step], verdict: "DROP" };
  }
  const family = addressFamily(pkt.dst);
  const loopBack = state.sets.get(family === "IPv6" ? "KUBE-6-LOOP-BACK" : "KUBE-LOOP-BACK");
  const masqueraded = live.map((x) =>
    r.marked || (loopBack?.entries.has(`${x.address},${pkt.protocol}:${x.port},${pkt.src}`) ?? false)
  );
  const name = (x: { address: string; port: number }) =>
    x.address.includes(":") ? `[${x.address}]:${x.port}` : `${x.address}:${x.port}`;
  const reach = live.map((x) => ({
    endpoint: name(x),
    probability: Math.round((x.weight / total) * 1e6) / 1e6,
  }))
    .sort((a, b) => (a.endpoint < b.endpoint ? -1 : 1));
  return {
    ...r,
    endpoints: reach.map((e) => e.endpoint),
    reach,
    masq: masqueraded.every((m) => m),
    masqMixed: masqueraded.some((m) => m) && !masqueraded.every((m) => m),
    affinity: svc.vs.persistentTimeout !== undefined,
    verdict: "DNAT",
    path: [
      ...r.path,
      step,
      ...live.map((x) => ({
        ...step,
        rule: `-a ${step.rule.split(" -s ")[0].slice(3)} -r ${name(x)} -m -w ${x.weight}`,
        depth: 1,
      })),
    ],
  };
}
