/**
 * `--write-config-to`: the effective configuration in upstream's format, as upstream writes it (its
 * internal configuration converted back to v1alpha1: every field, keys sorted, the sync periods and
 * masquerade-all only in the running mode's section). This program's own fields are added only where
 * they differ from their defaults, so with defaults the file is exactly upstream's.
 * @module
 */
import { dump } from "js-yaml";
import type { Logger } from "../runtime/logger.ts";
import { formatDuration } from "./duration.ts";
import {
  API_VERSION,
  defaultKubeProxyConfiguration,
  type FieldType,
  KIND,
  type KubeProxyConfiguration,
  modeSection,
  OWN_FIELDS,
  SCHEMA,
  type Schema,
} from "./kube_proxy_configuration.ts";

/** Returns `c` as the YAML upstream's `--write-config-to` would write. */
export function encodeConfig(c: KubeProxyConfiguration): string {
  const v = structuredClone(c);
  const own = modeSection(v.mode);
  for (const section of ["iptables", "ipvs", "nftables"] as const) {
    if (section === own) continue;
    v[section].syncPeriod = 0;
    v[section].minSyncPeriod = 0;
  }
  // Upstream holds one masquerade-all, written to the nftables section in that mode, else iptables'.
  if (v.mode === "nftables") v.iptables.masqueradeAll = false;
  else v.nftables.masqueradeAll = false;
  const defaults = defaultKubeProxyConfiguration() as unknown as Record<string, unknown>;
  const out = encodeObject(SCHEMA, v as unknown as Record<string, unknown>) as Record<string, unknown>;
  for (const k of Object.keys(OWN_FIELDS)) {
    if (JSON.stringify((v as unknown as Record<string, unknown>)[k]) === JSON.stringify(defaults[k])) {
      delete out[k];
    }
  }
  // omitempty in upstream's types.
  if (Object.keys(v.featureGates).length === 0) delete out.featureGates;
  const options = (out.logging as { options: Record<string, { splitStream?: boolean }> }).options;
  for (const f of Object.values(options)) if (!f.splitStream) delete f.splitStream;
  return dump(sorted({ apiVersion: API_VERSION, kind: KIND, ...out }), { lineWidth: -1 });
}

/** Returns `v` with every mapping's keys in order, as Go's YAML encoding writes them. */
function sorted(v: unknown): unknown {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
  return Object.fromEntries(
    Object.keys(v).sort().map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
  );
}

function encodeObject(schema: Schema, v: Record<string, unknown>): unknown {
  return Object.fromEntries(
    Object.entries(schema).flatMap(([k, t]) => {
      const x = encodeValue(t, v[k]);
      return x === OMIT ? [] : [[k, x]];
    }),
  );
}

const OMIT = Symbol("omit");

function encodeValue(t: FieldType, v: unknown): unknown {
  if (typeof t === "object") return encodeObject(t, v as Record<string, unknown>);
  switch (t) {
    case "duration":
    case "flushFrequency":
      return formatDuration(v as number);
    case "duration?":
      return v === null ? null : formatDuration(v as number);
    case "vmodule?":
      return v === null || (v as unknown[]).length === 0 ? OMIT : v; // omitempty
    default:
      return v;
  }
}

/**
 * `--write-config-to`: writes `c` (see {@linkcode encodeConfig}) to `path` and changes nothing
 * else; says so in the log.
 * @throws {Deno.errors.PermissionDenied} and the like when the file cannot be written.
 */
export async function writeConfigFile(c: KubeProxyConfiguration, path: string, log: Logger): Promise<void> {
  await Deno.writeTextFile(path, encodeConfig(c));
  log.info("Wrote configuration", { file: path });
}
