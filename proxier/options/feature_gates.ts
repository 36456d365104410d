/**
 * `--feature-gates` / `featureGates:` as upstream's component-base feature gate: every gate upstream
 * 1.37 knows is accepted with its default and stage (`feature_gate_list.ts`); an unknown name, or a
 * locked gate set against its lock, is refused with upstream's message; setting a GA or deprecated
 * gate warns as upstream does. The gates that change what this program does are named below.
 * @module
 */
import { type FeatureStage, UPSTREAM_FEATURE_GATES } from "./feature_gate_list.ts";

/** A feature gate's name. */
export type Feature = string;

/**
 * externalIPs are programmed (KEP-5707: the field is deprecated since 1.36, the control against
 * CVE-2020-8554; the gate is GA in upstream's spec, default true until 1.40).
 */
export const ALLOW_SERVICE_EXTERNAL_IPS: Feature = "AllowServiceExternalIPs";
/** `--proxy-mode=ipvs` may run (deprecated in 1.37; its default turns false in 1.40). */
export const KUBE_PROXY_IPVS: Feature = "KubeProxyIPVS";
/** nftables mode serves loopback NodePorts through a socket proxy (alpha in 1.37, KEP-6032). */
export const KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS: Feature = "KubeProxyNFTablesLocalhostNodePorts";

/** The gates that change what this program does; the others are accepted and change nothing here. */
export const ACTING_FEATURES: readonly Feature[] = [
  ALLOW_SERVICE_EXTERNAL_IPS,
  KUBE_PROXY_IPVS,
  KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS,
];

/** The `AllAlpha` / `AllBeta` pseudo-gates: the default of every alpha / beta gate not set by name. */
const ALL_ALPHA: Feature = "AllAlpha";
const ALL_BETA: Feature = "AllBeta";

/** What upstream knows of one gate. `stage` as upstream's PreRelease; `""` is GA in the metric. */
export interface FeatureSpec {
  readonly default: boolean;
  readonly stage: FeatureStage;
  /** Set to anything but the default is refused. */
  readonly locked: boolean;
}

/** Upstream 1.37's gates by name. */
export const KNOWN_FEATURES: ReadonlyMap<Feature, FeatureSpec> = new Map(
  UPSTREAM_FEATURE_GATES.map(([name, d, stage, locked = false]) => [name, { default: d, stage, locked }]),
);

/** The effective gates of one run; see the module doc. */
export class FeatureGates {
  readonly #set: ReadonlyMap<Feature, boolean>;
  /** What setting the gates logs at start, as upstream: one line per GA or deprecated gate set. */
  readonly warnings: readonly string[];

  /**
   * Applies `set` (the names and values given) over upstream's defaults. Throws an Error with
   * upstream's message (`unrecognized feature gate: X`, `cannot set feature gate X to false,
   * feature is locked to true`) for the first name it refuses, in the order given.
   */
  constructor(set: Readonly<Record<Feature, boolean>> = {}) {
    const warnings: string[] = [];
    for (const [name, value] of Object.entries(set)) {
      const spec = KNOWN_FEATURES.get(name);
      if (spec === undefined) throw new Error(`unrecognized feature gate: ${name}`);
      if (spec.locked && value !== spec.default) {
        throw new Error(`cannot set feature gate ${name} to ${value}, feature is locked to ${spec.default}`);
      }
      if (spec.stage === "GA" || spec.stage === "DEPRECATED") {
        warnings.push(
          `Setting ${spec.stage === "GA" ? "GA" : "deprecated"} feature gate ${name}=${value}. ` +
            "It will be removed in a future release.",
        );
      }
    }
    this.#set = new Map(Object.entries(set));
    this.warnings = warnings;
  }

  /** Returns whether `name` is on: as set, else as `AllAlpha`/`AllBeta` say for its stage, else its default. */
  enabled(name: Feature): boolean {
    const set = this.#set.get(name);
    if (set !== undefined) return set;
    const spec = KNOWN_FEATURES.get(name);
    if (spec === undefined) throw new Error(`feature gate ${name} is not one of upstream's`);
    if (spec.stage === "ALPHA" && name !== ALL_ALPHA && this.#set.has(ALL_ALPHA)) {
      return this.#set.get(ALL_ALPHA)!;
    }
    if (spec.stage === "BETA" && name !== ALL_BETA && this.#set.has(ALL_BETA)) {
      return this.#set.get(ALL_BETA)!;
    }
    return spec.default;
  }

  /**
   * Returns every known gate with its stage as upstream's `kubernetes_feature_enabled` labels it
   * (`""` for GA) and whether it is on, sorted by name.
   */
  all(): Array<{ name: Feature; stage: string; enabled: boolean }> {
    return [...KNOWN_FEATURES].map(([name, spec]) => ({
      name,
      stage: spec.stage === "GA" ? "" : spec.stage,
      enabled: this.enabled(name),
    }));
  }
}
