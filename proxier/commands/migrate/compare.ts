/**
 * `migrate`'s comparison: for every Service port and every kind of client (`explain`'s list, drawn
 * from both modes' views of the node, so a client only one of them serves is asked of both), the
 * answer of the rules that program the node now beside the answer of the target's rendered rules,
 * and each port's scheduler and limits in both modes. What differs is grouped by cause, each cause
 * with what would keep today's behaviour where there is something. Pure: the command asks the
 * datapaths (`migrate.ts`).
 * @module
 */
import type { DatapathAnswer, FamilyView } from "../../family_view.ts";
import { isLoopback } from "../../model/net.ts";
import { usableEndpoints } from "../../model/topology.ts";
import type { ServicePortInfo } from "../../model/types.ts";
import { type Client, type ClientOptions, clientsOf } from "../../read_side/clients.ts";
import { addressClaims, claimText } from "../../read_side/claims.ts";
import type { ProxyMode } from "../../options/config.ts";
import type { DatapathTraits } from "../../datapath_traits.ts";
import type { MigrationAdvice } from "../../mode_definition.ts";

/** The schema name of `migrate --output=json`. */
export const MIGRATE_SCHEMA = "kube-proxy-deno.migrate/v1";

/** One client of one port, asked of both datapaths. */
export interface Pair {
  readonly service: string;
  /** `name port/PROTOCOL` of the port (`http 80/TCP`), and its family. */
  readonly port: string;
  readonly family: FamilyView["family"];
  readonly svc: ServicePortInfo;
  readonly view: FamilyView;
  readonly client: Client;
}

/** Why a difference is there (stable codes of the JSON schema). */
export type Cause =
  | "invalid-drop"
  | "unserved-ports"
  | "unallocated-service-ips"
  | "localhost-nodeport"
  | "nodeport-addresses"
  | "source-ranges"
  | "no-endpoints"
  | "external-traffic-policy-local"
  | "masquerade"
  | "proxy-source"
  | "scheduler"
  | "affinity-reset"
  | "limits"
  | "endpoints";

/** One thing a client (or a port) would see change. */
export interface Difference {
  readonly service: string;
  readonly port: string;
  /** The client, for a connection's difference; absent for a port's (scheduler, limits). */
  readonly client?: string;
  /** The connection, for a connection's difference. */
  readonly connection?: { readonly src: string; readonly dst: string; readonly port: number };
  readonly before: string;
  readonly after: string;
}

/** The differences of one cause. */
export interface DifferenceGroup {
  readonly cause: Cause;
  /** One line: what changes, with the number of Services. */
  readonly title: string;
  /** The Services concerned, sorted. */
  readonly services: readonly string[];
  readonly differences: readonly Difference[];
  /** What would keep today's behaviour, where something can. */
  readonly keep?: string;
}

/** `migrate`'s report: the schema `kube-proxy-deno.migrate/v1`. */
export interface MigrationReport {
  readonly schema: typeof MIGRATE_SCHEMA;
  readonly node: string;
  readonly from: { readonly mode: ProxyMode; readonly rules: string };
  readonly to: { readonly mode: ProxyMode; readonly rules: string };
  /** Addresses and ports more than one Service claims, each with who wins, in the target's rules. */
  readonly claims: readonly string[];
  /** The node's addresses each NodePort was asked on, and where they came from. */
  readonly nodeAddresses: { readonly addresses: readonly string[]; readonly from: string };
  readonly groups: readonly DifferenceGroup[];
  /** Connections compared and found the same. */
  readonly unchanged: number;
  /** Every connection compared, with both answers, changed or not (what a test of the move holds to). */
  readonly connections: readonly (Difference & { readonly changed: boolean })[];
  /** Connections one datapath could not answer (a rule the tracer does not know), each with why. */
  readonly unanswered: readonly Difference[];
}

/**
 * Returns every client to ask, for every port either mode's views hold: `explain`'s clients of the
 * port in each view (shaped by `opts`), the same connection asked once.
 */
export function pairsOf(
  before: readonly FamilyView[],
  after: readonly FamilyView[],
  opts: ClientOptions = {},
): Pair[] {
  const out: Pair[] = [];
  for (const view of after) {
    const other = before.find((v) => v.family === view.family);
    for (const [key, svc] of [...view.services].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const seen = new Set<string>();
      const port = `${svc.name.port === "" ? "" : `${svc.name.port} `}${svc.port}/${svc.protocol}`;
      const fromBoth = [view, ...(other?.services.has(key) ? [other] : [])];
      for (const v of fromBoth) {
        for (const client of clientsOf(v.services.get(key)!, v, opts).clients) {
          const c = client.connection;
          const id = `${client.label}|${c.src}|${c.dst}|${c.port}`;
          if (seen.has(id)) continue;
          seen.add(id);
          out.push({ service: svc.service, port, family: view.family, svc, view, client });
        }
      }
    }
  }
  return out;
}

/** How an answer reads in a report: `DNAT to 10.0.0.1:80, 10.0.0.2:80 (masqueraded)`, `REJECT`. */
export function answerText(a: DatapathAnswer | undefined): string {
  if (a === undefined) return "not answered";
  if (a.verdict === "REJECT" && a.proxied === true) return "REJECT (a proxy: accepted, then closed at once)";
  if (a.verdict !== "DNAT") return a.verdict === "none" ? "not a service (passes untouched)" : a.verdict;
  const masq = a.proxied === true
    ? " (the proxy connects: the backend sees the node's address)"
    : a.masquerade === undefined
    ? ""
    : a.masquerade
    ? " (masqueraded)"
    : " (source kept)";
  const pin = a.pinned === undefined ? "" : " (this client's ClientIP affinity entry)";
  return `DNAT to ${a.endpoints.join(", ") || "nothing"}${masq}${pin}`;
}

/**
 * Whether two answers differ in what a client would notice: verdict, endpoints, masquerading. A
 * client pinned by its ClientIP affinity entry reaches one of the endpoints: the same as an answer
 * that reaches it among others.
 */
function differ(a: DatapathAnswer, b: DatapathAnswer): boolean {
  if (a.verdict !== b.verdict) return true;
  if (a.verdict !== "DNAT") return false;
  const pin = a.pinned?.endpoint ?? b.pinned?.endpoint;
  const other = a.pinned !== undefined ? b : a;
  if (pin !== undefined ? !other.endpoints.includes(pin) : a.endpoints.join() !== b.endpoints.join()) {
    return true;
  }
  return a.masquerade !== undefined && b.masquerade !== undefined && a.masquerade !== b.masquerade;
}

/** The cause of a connection's difference, from the connection and the port (first that holds). */
function causeOf(p: Pair, a: DatapathAnswer, b: DatapathAnswer): Cause {
  const c = p.client.connection;
  // Loopback NodePorts served on one side only; served on both, they differ for another cause.
  if (p.client.via === "NodePort" && isLoopback(c.dst) && (a.verdict === "none") !== (b.verdict === "none")) {
    return "localhost-nodeport";
  }
  if (p.client.via === "NodePort" && (a.verdict === "none") !== (b.verdict === "none")) {
    return "nodeport-addresses";
  }
  if (p.client.via === "load balancer IP" && p.svc.loadBalancerSourceRanges.length > 0) {
    return "source-ranges";
  }
  if (usableEndpoints(p.view.endpoints.get(portKey(p)) ?? []).length === 0) return "no-endpoints";
  if (p.svc.externalPolicyLocal && p.client.via !== "cluster IP") return "external-traffic-policy-local";
  if (a.verdict === b.verdict && a.endpoints.join() === b.endpoints.join()) {
    return a.proxied === true || b.proxied === true ? "proxy-source" : "masquerade";
  }
  return "endpoints";
}

function portKey(p: Pair): string {
  for (const [k, s] of p.view.services) if (s === p.svc) return k;
  return "";
}

/**
 * The algorithm a mode's description of a port's balancing names (`sh: hash of the source address`,
 * `random (the default)`, `random; mh is not honoured here`, ipvs's `rr`): what two modes compare.
 */
function algorithm(described: string): string {
  return described.split(/[:;( ]/)[0];
}

const TITLES: Readonly<Record<Cause, string>> = {
  "invalid-drop": "forwarded packets conntrack finds INVALID (out-of-window TCP)",
  "unserved-ports": "a port no Service serves on a service address",
  "unallocated-service-ips": "service-CIDR addresses no Service holds",
  "localhost-nodeport": "NodePorts on the loopback address",
  "nodeport-addresses": "NodePorts on the node's other addresses",
  "source-ranges": "loadBalancerSourceRanges",
  "no-endpoints": "Services without usable endpoints",
  "external-traffic-policy-local": "externalTrafficPolicy Local",
  "masquerade": "source address kept or masqueraded",
  "proxy-source": "source address: a proxy connects from the node, so the backends see the node's address",
  "scheduler": "how new connections are balanced",
  "affinity-reset": "ClientIP affinity entries (each datapath keeps its own)",
  "limits": "what the mode cannot program",
  "endpoints": "endpoints reached",
};

/**
 * What keeps today's behaviour for a cause, when something does; `advice` is the target mode's own
 * word on the causes it can keep ({@linkcode MigrationAdvice}).
 */
function keepFor(cause: Cause, advice: MigrationAdvice, d: readonly Difference[]): string | undefined {
  switch (cause) {
    case "localhost-nodeport":
      return d.some((x) => x.before.startsWith("DNAT") && x.after.startsWith("not a service"))
        ? advice.localhostNodePorts
        : undefined;
    case "scheduler":
      return advice.scheduler;
    case "invalid-drop":
      return d.some((x) => x.before === "kept")
        ? "set `conntrack.tcpBeLiberal: true` (`--conntrack-tcp-be-liberal`): no packet is then INVALID for being out of window"
        : undefined;
    case "nodeport-addresses": {
      // The addresses that answer today and would not: name them (each as a host route) beside the
      // target's own choice.
      const lost = [
        ...new Set(d.filter((x) => x.after.startsWith("not a service")).map((x) => x.connection!.dst)),
      ];
      if (lost.length === 0) return undefined;
      const hosts = lost.map((ip) => `${ip}/${ip.includes(":") ? 128 : 32}`).join(",");
      return `list every address that must keep answering: \`--nodeport-addresses=primary,${hosts}\``;
    }
    case "masquerade":
      return "check `--cluster-cidr` / `--detect-local-mode` (and `--masquerade-all`) for the target";
    case "source-ranges":
      // Only where a source admitted today would be refused (or the reverse): a change of how a
      // refused source is refused (DROP, or a proxy's accept and close) keeps it refused.
      return d.some((x) => x.before.startsWith("DNAT") !== x.after.startsWith("DNAT"))
        ? "the target enforces the ranges as listed: add the sources that must stay admitted"
        : undefined;
    default:
      return undefined;
  }
}

/** What a mode does for every Service where modes differ: its traits, and what its rules do. */
export interface ModeWide {
  readonly traits: DatapathTraits;
  /** `conntrack.tcpBeLiberal`: no rule drops INVALID packets. */
  readonly liberal: boolean;
  /**
   * Whether its rules drop a forwarded INVALID packet, as traced through them (a listing says what
   * its writer did, whichever program that was); undefined: from its traits.
   */
  readonly dropsInvalid?: boolean;
}

const EVERY = "(every Service)";

/** The differences that hold for every Service: the modes' traits no client of `explain` shows. */
function modeWide(a: ModeWide, b: ModeWide, serviceCIDRs: boolean): Array<[Cause, Difference]> {
  const out: Array<[Cause, Difference]> = [];
  const differs = (cause: Cause, f: (m: ModeWide) => string) => {
    if (f(a) !== f(b)) out.push([cause, { service: EVERY, port: "", before: f(a), after: f(b) }]);
  };
  differs(
    "invalid-drop",
    (m) => (m.dropsInvalid ?? (m.traits.dropsInvalid && !m.liberal)) ? "dropped" : "kept",
  );
  const unserved = {
    "none": "passes",
    "cluster-ips": "REJECT on cluster IPs",
    "service-ips": "REJECT on every service address",
  };
  differs("unserved-ports", (m) => unserved[m.traits.rejectsUnservedPorts]);
  // Only where the cluster's ServiceCIDRs are known (the API serves them): without them nothing is dropped.
  if (serviceCIDRs) {
    differs(
      "unallocated-service-ips",
      (m) => m.traits.dropsUnallocatedServiceIPs ? "DROP" : "passes (routed on)",
    );
  }
  return out;
}

/**
 * Compares the two datapaths' answers (`before[i]`, `after[i]` for `pairs[i]`) and the ports'
 * schedulers and limits in both modes' views; returns the report.
 */
export function compareMigration(o: {
  readonly node: string;
  readonly from: MigrationReport["from"];
  readonly to: MigrationReport["to"];
  readonly nodeAddresses: MigrationReport["nodeAddresses"];
  readonly pairs: readonly Pair[];
  readonly before: ReadonlyArray<DatapathAnswer | undefined>;
  readonly after: ReadonlyArray<DatapathAnswer | undefined>;
  readonly beforeViews: readonly FamilyView[];
  /** What each mode does for every Service. */
  readonly wide: { readonly before: ModeWide; readonly after: ModeWide };
  /** The target mode's word on keeping today's behaviour. */
  readonly advice?: MigrationAdvice;
}): MigrationReport {
  const groups = new Map<Cause, Difference[]>();
  const add = (cause: Cause, d: Difference) => {
    let list = groups.get(cause);
    if (list === undefined) groups.set(cause, list = []);
    list.push(d);
  };
  const cidrs = [...o.beforeViews, ...o.pairs.map((p) => p.view)].some((v) => v.serviceCIDRs.length > 0);
  for (const [cause, d] of modeWide(o.wide.before, o.wide.after, cidrs)) add(cause, d);
  let unchanged = 0;
  const unanswered: Difference[] = [];
  const connections: Array<Difference & { changed: boolean }> = [];
  o.pairs.forEach((p, i) => {
    const [a, b] = [o.before[i], o.after[i]];
    const { src, dst, port } = p.client.connection;
    const base = {
      service: p.service,
      port: `${p.port} ${p.family}`,
      client: p.client.label,
      connection: { src, dst, port },
    };
    if (a === undefined || b === undefined || a.verdict === "UNKNOWN" || b.verdict === "UNKNOWN") {
      unanswered.push({ ...base, before: a?.note ?? answerText(a), after: b?.note ?? answerText(b) });
      return;
    }
    const d = { ...base, before: answerText(a), after: answerText(b) };
    const changed = differ(a, b);
    connections.push({ ...d, changed });
    if (!changed) unchanged++;
    else add(causeOf(p, a, b), d);
  });
  // A port's own differences: how it balances, what the mode cannot program of it.
  const ports = new Map<string, Pair>();
  for (const p of o.pairs) ports.set(`${p.family}|${p.service}|${p.port}`, p);
  for (const p of ports.values()) {
    const key = portKey(p);
    const old = o.beforeViews.find((v) => v.family === p.family);
    const svc = old?.services.get(key);
    if (old === undefined || svc === undefined) continue;
    const at = { service: p.service, port: `${p.port} ${p.family}` };
    const [sa, sb] = [old.scheduler(svc) ?? "random", p.view.scheduler(p.svc) ?? "random"];
    // Without an endpoint there is nothing to balance: the scheduler changes nothing a client sees.
    const balanced = [old, p.view].some((v) => (v.endpoints.get(key) ?? []).length > 0);
    if (balanced && algorithm(sa) !== algorithm(sb)) add("scheduler", { ...at, before: sa, after: sb });
    // The new datapath starts with no affinity entry: a pinned client may land elsewhere once.
    if (o.from.mode !== o.to.mode && p.svc.stickyMaxAgeSeconds > 0 && balanced) {
      add("affinity-reset", {
        ...at,
        before: `clients pinned to their endpoint (${p.svc.stickyMaxAgeSeconds} s)`,
        after: "every client starts over: a pinned client may move to another endpoint once",
      });
    }
    const [la, lb] = [old.limits(svc).join("; "), p.view.limits(p.svc).join("; ")];
    if (la !== lb) add("limits", { ...at, before: la || "none", after: lb || "none" });
  }
  const order = Object.keys(TITLES) as Cause[];
  return {
    schema: MIGRATE_SCHEMA,
    node: o.node,
    from: o.from,
    to: o.to,
    nodeAddresses: o.nodeAddresses,
    claims: o.pairs.map((p) => p.view).filter((v, i, a) => a.indexOf(v) === i).flatMap(addressClaims).map(
      claimText,
    ),
    groups: [...groups].sort(([x], [y]) => order.indexOf(x) - order.indexOf(y)).map(
      ([cause, differences]) => {
        const services = [...new Set(differences.map((d) => d.service))].sort();
        const keep = keepFor(cause, o.advice ?? {}, differences);
        return {
          cause,
          title: `${TITLES[cause]} (${
            services[0] === EVERY
              ? "every Service"
              : `${services.length} Service${services.length === 1 ? "" : "s"}`
          })`,
          services,
          differences,
          ...(keep === undefined ? {} : { keep }),
        };
      },
    ),
    unchanged,
    unanswered,
    connections,
  };
}
