/**
 * `/debug/services`' list: one line per Service the proxy holds.
 * @module
 */
import type { FamilyView } from "../family_view.ts";
import { usableEndpoints } from "../model/topology.ts";

/** The schema name of `/debug/services`' list. */
export const SERVICES_SCHEMA = "kube-proxy-deno.services/v1";

const iso = (ms: number | undefined) => ms === undefined ? null : new Date(ms).toISOString();

/** One line per Service for `/debug/services`: its ports, endpoints usable of total, times. */
export interface ServiceSummary {
  readonly service: string;
  readonly ports: string[];
  readonly endpoints: { readonly usable: number; readonly total: number };
  readonly changed: string | null;
  readonly applied: string | null;
}

/** Returns every Service the views hold, sorted, one summary each. */
export function summarizeServices(views: readonly FamilyView[]): ServiceSummary[] {
  const by = new Map<
    string,
    { ports: Set<string>; usable: Set<string>; total: Set<string>; view: FamilyView }
  >();
  for (const view of views) {
    for (const [key, svc] of view.services) {
      let s = by.get(svc.service);
      if (s === undefined) {
        by.set(svc.service, s = { ports: new Set(), usable: new Set(), total: new Set(), view });
      }
      s.ports.add(
        `${svc.name.port === "" ? "" : `${svc.name.port} `}${svc.port}/${svc.protocol} (${view.family})`,
      );
      const eps = view.endpoints.get(key) ?? [];
      for (const e of eps) s.total.add(e.key);
      for (const e of usableEndpoints(eps)) s.usable.add(e.key);
    }
  }
  return [...by.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([service, s]) => {
    const t = views.map((v) => v.timing(service)).find((x) => x !== undefined);
    return {
      service,
      ports: [...s.ports],
      endpoints: { usable: s.usable.size, total: s.total.size },
      changed: iso(t?.changedMs),
      applied: iso(t?.appliedMs),
    };
  });
}
