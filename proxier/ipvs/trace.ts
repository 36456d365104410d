/**
 * Which endpoint a packet reaches in ipvs mode: the iptables walk (nat marks, filter verdicts, with
 * `-m set` answered from the ipsets), then the virtual server IPVS holds for the destination and
 * its real servers (weight above 0) with their shares, masquerading (marked in nat, or hairpin
 * through the loop-back set), over the live datapath, a `render` output, or the tests' fakes:
 * `trace --proxy-mode=ipvs`.
 * @module
 */
import { IpLinkRunner } from "../../iptables/ip_link.ts";
import type { Executor } from "../../iptables/executor.ts";
import { addressFamily, type IPFamily } from "../../iptables/ip.ts";
import { IpsetRunner, parseIpsetSave } from "../../iptables/ipset.ts";
import { IptablesRunner } from "../../iptables/iptables.ts";
import { IpvsadmRunner, type IpvsService, parseSave, vsKey } from "../../iptables/ipvsadm.ts";
import { parseRules, type RuleSource, type SetLookup, tracePacket } from "../trace/iptables_walker.ts";
import type { IptablesBackend } from "../options/config.ts";
import { chooseIptablesBackend } from "../_common/iptables_backend.ts";
import {
  type Packet,
  queryPacket,
  queryRules,
  type TraceDeps,
  type TraceQuery,
  type TraceResult,
} from "../trace/packet.ts";
import { SET, setName } from "./layout.ts";
import { lastParsed } from "../trace/parse_memo.ts";

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
  const name = (x: { address: string; port: number }) =>
    x.address.includes(":") ? `[${x.address}]:${x.port}` : `${x.address}:${x.port}`;
  let live = svc.reals.filter((x) => x.weight > 0);
  // Persistence: IPVS's template for this client sends it back to its earlier real server.
  if (svc.vs.persistentTimeout !== undefined && pkt.returningTo !== undefined) {
    const again = live.filter((x) => name(x) === pkt.returningTo);
    if (again.length > 0) live = again;
  }
  const total = live.reduce((n, x) => n + x.weight, 0);
  if (live.length === 0) {
    // IPVS accepts the connection and has nowhere to send it: it times out.
    return { ...r, path: [...r.path, step], verdict: "DROP" };
  }
  const family = addressFamily(pkt.dst);
  const loopBack = state.sets.get(family === "IPv6" ? "KUBE-6-LOOP-BACK" : "KUBE-LOOP-BACK");
  // Marked packets are masqueraded in nat POSTROUTING; one from elsewhere sent to a real server on
  // this node's own address is delivered to it and never gets there.
  const delivered = (ip: string) =>
    !pkt.fromHost &&
    (local.includes(ip) || (addressFamily(ip) === "IPv4" ? ip.startsWith("127.") : ip === "::1"));
  const masqueraded = live.map((x) =>
    (r.marked && !delivered(x.address)) ||
    (loopBack?.entries.has(`${x.address},${pkt.protocol}:${x.port},${pkt.src}`) ?? false)
  );
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

/** `trace --proxy-mode=ipvs`: traces `q` through the live datapath (read only) or a `render` output. */
export async function traceIpvsMode(
  q: TraceQuery,
  { exec, config, nodeIPs }: TraceDeps,
): Promise<TraceResult> {
  const family = addressFamily(q.dst) ?? "IPv4";
  const text = await queryRules(q);
  const state = text === undefined
    ? await liveState(exec, family, config.iptablesBackend)
    : renderedOnce[family](text);
  const r = traceIpvs(state, queryPacket(q, family, nodeIPs), nodeIPs);
  // A live client's persistence template is IPVS's, in its connection table: not read here.
  return text === undefined && r.affinity
    ? {
      ...r,
      affinityUnread: "ClientIP affinity: a client with a persistence template in IPVS goes back to its " +
        "endpoint; templates are not read here",
    }
    : r;
}

/** A rendered output's state per family, parsed once for all the traces that read it. */
const renderedOnce = {
  IPv4: lastParsed((text) => renderedIpvsState(text, "IPv4")),
  IPv6: lastParsed((text) => renderedIpvsState(text, "IPv6")),
};
/** The live rules, parsed once for all the traces of one read. */
const rulesOnce = lastParsed(parseRules);

/** The ipvs datapath of this network namespace, read only: virtual servers, sets, rules, binds. */
async function liveState(exec: Executor, family: IPFamily, requested: IptablesBackend): Promise<IpvsState> {
  const { backend } = await chooseIptablesBackend(exec, requested);
  const ipt = new IptablesRunner({ exec, family, backend });
  const [services, sets, nat, filter, bound] = await Promise.all([
    new IpvsadmRunner({ exec }).read(),
    new IpsetRunner({ exec }).save(),
    ipt.save("nat"),
    ipt.save("filter"),
    new IpLinkRunner({ exec }).addresses(),
  ]);
  return {
    rules: rulesOnce(nat + filter),
    sets: {
      get: (name) => {
        const c = sets.get(name);
        return c && { type: c.spec.type, entries: c.entries };
      },
    },
    services,
    bound: new Set(bound),
  };
}

/** Returns the ipvs datapath a `render --proxy-mode=ipvs` output describes: its ipset, iptables-restore and ipvsadm sections. */
export function renderedIpvsState(text: string, family: IPFamily): IpvsState {
  const sections = new Map<string, string>();
  for (const part of text.split(/^# /m).filter((p) => p !== "")) {
    const nl = part.indexOf("\n");
    sections.set(part.slice(0, nl), part.slice(nl + 1));
  }
  const find = (prefix: string) => [...sections].find(([h]) => h.startsWith(prefix))?.[1] ?? "";
  const tag = `(${family})`;
  const ipsetText = [...sections].find(([h]) => h.startsWith("ipset") && h.includes(tag))?.[1] ?? "";
  const ipvsText = [...sections].find(([h]) => h.startsWith("ipvsadm") && h.includes(tag))?.[1] ?? "";
  const sets = parseIpsetSave(ipsetText);
  const bound = sets.get(setName(SET.IPVS_IPS, family))?.entries ?? new Set<string>();
  return {
    rules: parseRules(find(family === "IPv4" ? "iptables-restore" : "ip6tables-restore")),
    sets: {
      get: (name) => {
        const c = sets.get(name);
        return c && { type: c.spec.type, entries: c.entries };
      },
    },
    services: parseSave(ipvsText),
    bound: new Set(bound),
  };
}
