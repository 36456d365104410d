/**
 * `explain`'s report on one Service: for each port and each kind of client, the expected answer
 * (`expectation.ts`) and the datapath's own (a `trace` through the kernel's rules, or a socket proxy's
 * listener), and whether they agree. Its JSON is the schema `kube-proxy-deno.explain/v1`
 * (`proxier/explain/README.md`); the command and `/debug/services` print the same object.
 * @module
 */
import type { Connection, DatapathAnswer, FamilyView } from "../family_view.ts";
import type { ProxyMode } from "../options/config.ts";
import { usableEndpoints } from "../model/topology.ts";
import type { EndpointInfo, IPFamily, ServicePortInfo } from "../model/types.ts";
import { type Client, clientsOf, type SkippedClient } from "./clients.ts";
import type { CheckAsked, DatapathCheck } from "./datapath_check.ts";
import { type Exclusion, type Expectation, expectConnection, type ExpectedDatapath } from "./expectation.ts";
import { addressClaims, CLAIM_ORDER, claimText } from "./claims.ts";

/** The schema name every report carries. */
export const EXPLAIN_SCHEMA = "kube-proxy-deno.explain/v1";

/** Where `explain` reads the model and asks the datapath. */
export interface ExplainContext {
  /** The mode whose datapath is explained: its name and its traits. */
  readonly mode: ExpectedDatapath & { readonly name: ProxyMode };
  readonly node: string;
  /** Whose rules are checked: this node's (`live`) or those `render` writes (`rendered`). */
  readonly rules: "live" | "rendered";
  /** One view per family the mode serves. */
  readonly views: readonly FamilyView[];
  /** The datapath's answers for the report's clients, asked together (`check.ts`). */
  readonly check: DatapathCheck;
  /** `--client-ip`: a real client asked about instead of the synthetic external one. */
  readonly clientIP?: string;
  /**
   * The live node's kernel: the source it picks for the node's own connection to each address
   * (`route.ts`); absent for rendered rules (the node's first address stands for it).
   */
  readonly nodeSources?: (dsts: readonly string[]) => Promise<ReadonlyMap<string, string>>;
  /** The running proxy's last completed sync (ms since the epoch); absent for rendered rules. */
  readonly lastSyncMs?: () => number | undefined;
}

/** One client's line of the report. */
export interface ClientReport {
  readonly client: Client["kind"];
  readonly via: Client["via"];
  readonly label: string;
  readonly connection: Connection;
  readonly expected: Expectation;
  /** The datapath's answer; null when none can be read here (then `agrees` is null too). */
  readonly datapath: DatapathAnswer | null;
  /** The datapath does what the model says; null when it could not be asked or answered UNKNOWN. */
  readonly agrees: boolean | null;
  /** What differs, when `agrees` is false. */
  readonly disagreement?: string;
  /**
   * Another Service claims this address and port and wins it (`claims.ts`): the connection reaches
   * that Service's endpoints, never this one's. Such a client is counted in `claimed`, never as agreeing.
   */
  readonly claimedBy?: string;
}

/** One endpoint of a port as the proxy holds it. */
export interface EndpointReport {
  readonly endpoint: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly local: boolean;
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
}

/** One port of the Service in one family. */
export interface PortReport {
  readonly name: string;
  readonly protocol: ServicePortInfo["protocol"];
  readonly family: IPFamily;
  readonly clusterIP: string;
  readonly port: number;
  readonly nodePort: number | null;
  readonly externalIPs: readonly string[];
  readonly loadBalancerIPs: readonly string[];
  readonly loadBalancerSourceRanges: readonly string[];
  readonly externalTrafficPolicy: "Cluster" | "Local";
  readonly internalTrafficPolicy: "Cluster" | "Local";
  /** ClientIP affinity's timeout; null without affinity. */
  readonly affinitySeconds: number | null;
  /**
   * How new connections are balanced: the IPVS scheduler (ipvs mode: kube-router's annotation,
   * else `--ipvs-scheduler`), the nftables mode's (the annotation's, else random); in the other
   * modes null, or what they do instead of an annotation they do not honour.
   */
  readonly scheduler: string | null;
  /** What the mode cannot do of the port's fields here (a sessionAffinity it cannot program...). */
  readonly limits: readonly string[];
  /** What the health check node port answers (externalTrafficPolicy Local); null without one. */
  readonly healthCheck: {
    readonly nodePort: number;
    readonly status: 200 | 503;
    readonly localEndpoints: number;
  } | null;
  readonly endpoints: readonly EndpointReport[];
  readonly clients: readonly ClientReport[];
  /** Clients of the port not asked about here, each with why and what would add it. */
  readonly skipped: readonly SkippedClient[];
  /** Its addresses and ports another Service claims too, each with who wins (`claims.ts`). */
  readonly claims: readonly string[];
}

/** The whole report. */
export interface ExplainReport {
  readonly schema: typeof EXPLAIN_SCHEMA;
  readonly service: string;
  readonly mode: ProxyMode;
  readonly node: string;
  readonly rules: "live" | "rendered";
  /** When the report was made, by the clock of the node that made it (RFC 3339). */
  readonly reportedAt: string;
  /** The running proxy's last completed sync, by the same clock; null for rendered rules or before the first. */
  readonly lastSync: string | null;
  /** When the proxy saw the Service's last change (RFC 3339), its slice's trigger time, and when a sync applied it. */
  readonly changed: string | null;
  readonly triggered: string | null;
  readonly applied: string | null;
  readonly ports: readonly PortReport[];
  /** Clients whose datapath answer differs from the model's. */
  readonly disagreements: number;
  /** Clients whose address and port another Service wins: they reach that Service, not this one. */
  readonly claimed: number;
  /**
   * Clients that could not be checked: not asked here (`skipped`), or the datapath could not answer
   * (`agrees` null). Never counted as agreeing.
   */
  readonly notChecked: number;
}

const iso = (ms: number | undefined) => ms === undefined ? null : new Date(ms).toISOString();

/**
 * Returns the report on Service `service` (`namespace/name`), its ports restricted to `port` (a
 * name or number) when given; undefined when no family holds a port of it (none, headless, or
 * ExternalName). Every datapath answer is asked for, one connection after another.
 */
export async function explainService(
  ctx: ExplainContext,
  service: string,
  port?: string,
): Promise<ExplainReport | undefined> {
  const ports: PortReport[] = [];
  let disagreements = 0;
  let claimed = 0;
  let timing;
  const asked: CheckAsked[] = [];
  const pending: Array<
    { view: FamilyView; svc: ServicePortInfo; key: string; expected: Expectation[]; skipped: SkippedClient[] }
  > = [];
  const mineOf = (view: FamilyView) =>
    [...view.services.entries()]
      .filter(([, s]) =>
        s.service === service && (port === undefined || s.name.port === port || String(s.port) === port)
      )
      .sort(([, a], [, b]) => a.port - b.port || a.name.port.localeCompare(b.name.port));
  const routes = await ctx.nodeSources?.(ctx.views.flatMap((v) => mineOf(v).map(([, s]) => s.clusterIP)));
  const nodeSource = routes === undefined ? undefined : (dst: string) => routes.get(dst);
  for (const view of ctx.views) {
    timing ??= view.timing(service);
    for (const [key, svc] of mineOf(view)) {
      const foreign = otherFamilies(ctx.views, view, key);
      const expected: Expectation[] = [];
      const plan = clientsOf(svc, view, { clientIP: ctx.clientIP, nodeSource });
      for (const client of plan.clients) {
        const own = expectConnection(ctx.mode, view, client.connection);
        expected.push(
          foreign.length === 0 || own.servicePort === undefined ? own : {
            ...own,
            excluded: [...own.excluded, ...foreign].sort((a, b) => (a.endpoint < b.endpoint ? -1 : 1)),
          },
        );
        asked.push({ client, view });
      }
      pending.push({ view, svc, key, expected, skipped: plan.skipped });
    }
  }
  // Every client's datapath answer at once: the rules are read and parsed once for the report.
  const answers = asked.length === 0 ? [] : await ctx.check(asked);
  let next = 0;
  for (const { view, svc, key, expected, skipped } of pending) {
    const clients = expected.map((e): ClientReport => {
      const { client } = asked[next];
      const datapath = answers[next++] ?? null;
      const verdict = compare(e, datapath);
      if (verdict.agrees === false) disagreements++;
      const winner = e.servicePort !== undefined && e.servicePort !== key
        ? view.services.get(e.servicePort)
        : undefined;
      if (winner !== undefined) claimed++;
      return {
        client: client.kind,
        via: client.via,
        label: client.label,
        connection: client.connection,
        expected: e,
        datapath,
        ...verdict,
        ...(winner === undefined ? {} : {
          claimedBy: `${winner.service} claims this address and port too and wins it (${CLAIM_ORDER}): ` +
            `the connection reaches ${winner.service}'s endpoints, not this Service's`,
        }),
      };
    });
    const claims = addressClaims(view).filter((c) => c.claimants.some((x) => x.key === key)).map(claimText);
    ports.push(portReport(view, svc, view.endpoints.get(key) ?? [], clients, skipped, claims));
  }
  if (ports.length === 0) return undefined;
  const notChecked = ports.reduce(
    (n, p) => n + p.skipped.length + p.clients.filter((c) => c.agrees === null).length,
    0,
  );
  return {
    schema: EXPLAIN_SCHEMA,
    service,
    mode: ctx.mode.name,
    node: ctx.node,
    rules: ctx.rules,
    reportedAt: new Date().toISOString(),
    lastSync: iso(ctx.lastSyncMs?.()),
    changed: iso(timing?.changedMs),
    triggered: iso(timing?.triggerMs),
    applied: iso(timing?.appliedMs),
    ports,
    disagreements,
    claimed,
    notChecked,
  };
}

/**
 * Returns why {@linkcode explainService} has no report on `service` (`port`): no family holds a port
 * of it (`what: "service"`), or it has ports and none is `port` (`what: "port"`; they are listed).
 */
export function whyNoReport(
  views: readonly FamilyView[],
  service: string,
  port?: string,
): { readonly missing: string; readonly what: "service" | "port" } {
  const ports = new Set<string>();
  for (const view of views) {
    for (const svc of view.services.values()) {
      if (svc.service === service) {
        ports.add(`${svc.name.port === "" ? "" : `${svc.name.port} `}${svc.port}/${svc.protocol}`);
      }
    }
  }
  if (ports.size === 0) {
    return {
      what: "service",
      missing:
        `no Service ${service} with a proxied port here (absent, headless, ExternalName, or not selected for this proxy)`,
    };
  }
  return {
    what: "port",
    missing: `Service ${service} has no port ${JSON.stringify(port)}; its ports: ${
      [...ports].sort().join(", ")
    }`,
  };
}

/** The other families' endpoints of service port `key`: never reached through `view`'s addresses. */
function otherFamilies(views: readonly FamilyView[], view: FamilyView, key: string): Exclusion[] {
  return views.filter((v) => v !== view).flatMap((v) =>
    (v.endpoints.get(key) ?? []).map((e) => ({
      endpoint: e.key,
      reason: "wrong-family" as const,
      detail: `an ${v.family} address: reached only through the Service's ${v.family} addresses` +
        (v.services.has(key) ? "" : `, and it has none`),
    }))
  );
}

function portReport(
  view: FamilyView,
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  clients: ClientReport[],
  skipped: SkippedClient[],
  claims: string[],
): PortReport {
  const usableLocal = usableEndpoints(eps, (e) => e.isLocal).length;
  return {
    name: svc.name.port,
    protocol: svc.protocol,
    family: view.family,
    clusterIP: svc.clusterIP,
    port: svc.port,
    nodePort: svc.nodePort === 0 ? null : svc.nodePort,
    externalIPs: svc.externalIPs,
    loadBalancerIPs: svc.loadBalancerIPs,
    loadBalancerSourceRanges: svc.loadBalancerSourceRanges,
    externalTrafficPolicy: svc.externalPolicyLocal ? "Local" : "Cluster",
    internalTrafficPolicy: svc.internalPolicyLocal ? "Local" : "Cluster",
    affinitySeconds: svc.stickyMaxAgeSeconds === 0 ? null : svc.stickyMaxAgeSeconds,
    scheduler: view.scheduler(svc),
    limits: view.limits(svc),
    healthCheck: svc.healthCheckNodePort === 0 ? null : {
      nodePort: svc.healthCheckNodePort,
      status: usableLocal > 0 ? 200 : 503,
      localEndpoints: usableLocal,
    },
    endpoints: [...eps].sort((a, b) => (a.key < b.key ? -1 : 1)).map((e) => ({
      endpoint: e.key,
      ready: e.ready,
      serving: e.serving,
      terminating: e.terminating,
      local: e.isLocal,
      zoneHints: e.zoneHints,
      nodeHints: e.nodeHints,
    })),
    clients,
    skipped,
    claims,
  };
}

/** Whether the datapath does what the model says, and what differs. */
function compare(
  e: Expectation,
  d: DatapathAnswer | null,
): { agrees: boolean | null; disagreement?: string } {
  if (d === null || d.verdict === "UNKNOWN") return { agrees: null };
  const list = (eps: readonly string[]) => eps.length === 0 ? "no endpoint" : eps.join(", ");
  if (d.verdict !== e.verdict) {
    return {
      agrees: false,
      disagreement: `${d.by}: ${d.verdict}${d.verdict === "DNAT" ? ` to ${list(d.endpoints)}` : ""}; ` +
        `the model: ${e.verdict}${e.verdict === "DNAT" ? ` to ${list(e.endpoints)}` : ""}`,
    };
  }
  if (e.verdict !== "DNAT") return { agrees: true };
  // A client with an affinity entry goes to its endpoint alone: one the model's choice holds.
  const pinned = d.pinned !== undefined && d.endpoints.length === 1 && d.endpoints[0] === d.pinned.endpoint;
  if (pinned && !e.endpoints.includes(d.pinned!.endpoint)) {
    return {
      agrees: false,
      disagreement: `${d.by} pin this client to ${d.pinned!.endpoint} (ClientIP affinity), which the model ` +
        `does not reach: ${list(e.endpoints)}`,
    };
  }
  if (!pinned && d.endpoints.join() !== e.endpoints.join()) {
    return {
      agrees: false,
      disagreement: `${d.by} reach ${list(d.endpoints)}; the model: ${list(e.endpoints)}`,
    };
  }
  if (d.masquerade !== undefined && e.masquerade !== undefined && d.masquerade !== e.masquerade) {
    return {
      agrees: false,
      disagreement: `${d.by} ${d.masquerade ? "masquerade" : "keep"} the source; the model ${
        e.masquerade ? "masquerades" : "keeps"
      } it`,
    };
  }
  return { agrees: true };
}

/** The exclusions of a client as text lines (for the text report). */
export function exclusionLines(excluded: readonly Exclusion[]): string[] {
  return excluded.map((x) => `not ${x.endpoint}: ${x.detail}`);
}
