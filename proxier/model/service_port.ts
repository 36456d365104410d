/**
 * Service -> ServicePortInfo[] for one IP family, with strict validation of every field that
 * reaches a rule.
 * @module
 */
import type { V1Service } from "@kubernetes/client-node";
import { cidrFamily, ipFamily, isDNSLabel, isPort, parseProtocol } from "./net.ts";
import type { IPFamily, ServicePortInfo } from "./types.ts";
import { namespacedName } from "./types.ts";
import { objectName, show, ValidationError } from "../runtime/errors.ts";

/**
 * The schedulers a Service can ask for (kube-router's annotation, `--ipvs-scheduler`): the IPVS
 * kernel's names.
 */
export const SCHEDULERS: ReadonlySet<string> = new Set([
  "rr",
  "wrr",
  "lc",
  "wlc",
  "lblc",
  "lblcr",
  "dh",
  "sh",
  "sed",
  "nq",
  "mh",
]);

/** The scheduler flags kube-router's annotation takes (ipvsadm's `-b`). */
export const SCHED_FLAGS: ReadonlySet<string> = new Set(["flag-1", "flag-2", "flag-3"]);

/** kube-router's per-Service IPVS scheduler annotation. */
export const SCHEDULER_ANNOTATION = "kube-router.io/service.scheduler";
/** kube-router's per-Service IPVS scheduler flags annotation. */
export const SCHEDFLAGS_ANNOTATION = "kube-router.io/service.schedflags";

/** Default ClientIP affinity timeout, as upstream (3 hours). */
export const DEFAULT_STICKY_MAX_AGE_SECONDS = 10800;

/** Result of converting one Service: its ports and the non-fatal problems skipped on the way. */
export interface ServicePortsResult {
  readonly ports: ServicePortInfo[];
  /** Entries skipped (bad external IP, bad source range): one message each. */
  readonly warnings: string[];
  /**
   * What the Service asks that the mode does not do (a scheduler it cannot honour): each is a
   * warning and an Event on the Service, with this reason.
   */
  readonly notices?: ReadonlyArray<{ readonly reason: string; readonly msg: string }>;
}

/** The Event reason of a scheduler annotation the mode does not honour. */
export const UNSUPPORTED_SCHEDULER = "UnsupportedScheduler";

/** How {@linkcode servicePorts} reads a Service. */
export interface ServicePortsOptions {
  /**
   * `spec.externalIPs` are served (feature gate AllowServiceExternalIPs, default true). When false
   * they are left out, as if absent, and a Service that has some says so in its warnings.
   */
  readonly allowExternalIPs?: boolean;
  /**
   * Returns what the proxy mode says about a scheduler annotation it does not honour (a warning and
   * an Event on the Service), undefined when it honours it. Default: says nothing.
   */
  readonly schedulerNotice?: (scheduler: string) => string | undefined;
  /**
   * Returns what the proxy mode cannot do of a port's fields (a warning and a Warning Event on the
   * Service with `reason`), undefined when it does them all. Default: says nothing.
   */
  readonly portNotice?: (
    port: ServicePortInfo,
  ) => { readonly reason: string; readonly msg: string } | undefined;
}

/**
 * Converts a Service into its ports for `family`. Returns no ports for headless and ExternalName
 * Services and for Services without a cluster IP of this family.
 * @throws {ValidationError} when a field the rules depend on is malformed.
 */
export function servicePorts(
  svc: V1Service,
  family: IPFamily,
  o: ServicePortsOptions = {},
): ServicePortsResult {
  const meta = svc?.metadata;
  const namespace = meta?.namespace ?? "default";
  const name = meta?.name;
  // Named only for a warning or an error: most Services have none.
  const obj = () => objectName("Service", namespace, name);
  if (!isDNSLabel(namespace)) throw new ValidationError(obj(), "metadata.namespace", show(namespace));
  if (!isDNSLabel(name)) throw new ValidationError(obj(), "metadata.name", show(name));
  const spec = svc.spec;
  if (spec === undefined || spec === null || typeof spec !== "object") {
    throw new ValidationError(obj(), "spec", "missing");
  }
  const type = spec.type ?? "ClusterIP";
  if (!["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].includes(type)) {
    throw new ValidationError(obj(), "spec.type", show(type));
  }
  const warnings: string[] = [];
  if (type === "ExternalName") return { ports: [], warnings };
  const clusterIPs: unknown[] = Array.isArray(spec.clusterIPs) && spec.clusterIPs.length > 0
    ? spec.clusterIPs
    : [spec.clusterIP];
  if (
    spec.clusterIP === "None" || clusterIPs[0] === "None" || clusterIPs[0] === "" ||
    clusterIPs[0] === undefined
  ) {
    return { ports: [], warnings };
  }
  // Each address read once: a dual-stack Service's are read in each family's first sync.
  let clusterIP: string | undefined;
  for (let i = 0; i < clusterIPs.length; i++) {
    const f = ipFamily(clusterIPs[i]);
    if (f === undefined) {
      throw new ValidationError(
        obj(),
        `spec.clusterIPs[${i}]`,
        `${show(clusterIPs[i])} is not an IP address`,
      );
    }
    if (f === family) clusterIP ??= clusterIPs[i] as string;
  }
  if (clusterIP === undefined) return { ports: [], warnings };

  let externalIPs: readonly string[] = NONE;
  if (o.allowExternalIPs !== false) {
    externalIPs = filterAddresses(obj, "spec.externalIPs", spec.externalIPs, family, warnings);
  } else if (Array.isArray(spec.externalIPs) && spec.externalIPs.length > 0) {
    warnings.push(
      `${obj()}: spec.externalIPs are not served: feature gate AllowServiceExternalIPs is false ` +
        "(externalIPs are deprecated, KEP-5707)",
    );
  }
  const ingress = type === "LoadBalancer" && Array.isArray(svc.status?.loadBalancer?.ingress)
    ? svc.status.loadBalancer.ingress
    : [];
  const lbIPs: unknown[] = [];
  ingress.forEach((ing, i) => {
    if (ing?.ip === undefined || ing.ip === null) return; // hostname-only ingress
    const mode = (ing as { ipMode?: unknown }).ipMode;
    if (mode !== undefined && mode !== null && mode !== "VIP") return; // Proxy mode: not ours
    if (ipFamily(ing.ip) === undefined) {
      warnings.push(`${obj()}: skipped status.loadBalancer.ingress[${i}].ip ${show(ing.ip)}`);
    } else lbIPs.push(ing.ip);
  });
  const loadBalancerIPs = nonEmpty(lbIPs.filter((ip) => ipFamily(ip) === family) as string[]);
  const ranges = Array.isArray(spec.loadBalancerSourceRanges) ? spec.loadBalancerSourceRanges : [];
  const sourceRanges: string[] = [];
  ranges.forEach((r, i) => {
    const trimmed = typeof r === "string" ? r.trim() : r;
    const f = cidrFamily(trimmed);
    if (f === undefined) {
      warnings.push(`${obj()}: skipped spec.loadBalancerSourceRanges[${i}] ${show(r)}`);
    } else if (f === family) sourceRanges.push(trimmed as string);
  });

  let stickyMaxAgeSeconds = 0;
  if (spec.sessionAffinity === "ClientIP") {
    const t = spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_STICKY_MAX_AGE_SECONDS;
    if (!Number.isInteger(t) || t < 1 || t > 86400) {
      throw new ValidationError(obj(), "spec.sessionAffinityConfig.clientIP.timeoutSeconds", show(t));
    }
    stickyMaxAgeSeconds = t;
  } else if (!(spec.sessionAffinity === undefined || spec.sessionAffinity === "None")) {
    throw new ValidationError(obj(), "spec.sessionAffinity", show(spec.sessionAffinity));
  }
  const isExternal = type === "NodePort" || type === "LoadBalancer" || externalIPs.length > 0;
  const externalPolicyLocal = isExternal && spec.externalTrafficPolicy === "Local";
  const internalPolicyLocal = spec.internalTrafficPolicy === "Local";
  let healthCheckNodePort = 0;
  if (type === "LoadBalancer" && externalPolicyLocal && spec.healthCheckNodePort != null) {
    if (!isPort(spec.healthCheckNodePort)) {
      throw new ValidationError(obj(), "spec.healthCheckNodePort", show(spec.healthCheckNodePort));
    }
    healthCheckNodePort = spec.healthCheckNodePort;
  }

  // kube-router's per-Service scheduler options: an unknown value is a warning, and the default applies.
  const annotations = meta?.annotations ?? {};
  let scheduler: string | undefined = annotations[SCHEDULER_ANNOTATION];
  if (scheduler !== undefined && !SCHEDULERS.has(scheduler)) {
    warnings.push(`${obj()}: ignored ${SCHEDULER_ANNOTATION} ${show(scheduler)} (not an IPVS scheduler)`);
    scheduler = undefined;
  }
  let schedFlags: string[] | undefined = annotations[SCHEDFLAGS_ANNOTATION]?.split(",").map((f) => f.trim());
  if (schedFlags !== undefined && !schedFlags.every((f) => SCHED_FLAGS.has(f))) {
    warnings.push(
      `${obj()}: ignored ${SCHEDFLAGS_ANNOTATION} ${
        show(annotations[SCHEDFLAGS_ANNOTATION])
      } (flag-1, flag-2, flag-3)`,
    );
    schedFlags = undefined;
  }
  const notice = scheduler === undefined ? undefined : o.schedulerNotice?.(scheduler);
  const notices: Array<{ reason: string; msg: string }> = notice === undefined
    ? []
    : [{ reason: UNSUPPORTED_SCHEDULER, msg: `${obj()}: ${notice}` }];

  if (!Array.isArray(spec.ports)) throw new ValidationError(obj(), "spec.ports", "missing");
  const seen = new Set<string>();
  const ports = spec.ports.map((p, i): ServicePortInfo => {
    const field = `spec.ports[${i}]`;
    const portName = p?.name ?? "";
    if (portName !== "" && !isDNSLabel(portName)) {
      throw new ValidationError(obj(), `${field}.name`, show(portName));
    }
    const protocol = parseProtocol(p?.protocol);
    if (protocol === undefined) throw new ValidationError(obj(), `${field}.protocol`, show(p.protocol));
    if (!isPort(p?.port)) throw new ValidationError(obj(), `${field}.port`, show(p?.port));
    const nodePort = p.nodePort ?? 0;
    if (nodePort !== 0 && !isPort(nodePort)) {
      throw new ValidationError(obj(), `${field}.nodePort`, show(nodePort));
    }
    const key = `${portName}/${protocol}`;
    if (seen.has(key)) throw new ValidationError(obj(), `${field}.name`, `duplicate ${show(portName)}`);
    seen.add(key);
    return {
      name: { namespace, name, port: portName, protocol },
      service: namespacedName(namespace, name),
      clusterIP,
      port: p.port,
      protocol,
      nodePort: type === "ClusterIP" ? 0 : nodePort,
      externalIPs,
      loadBalancerIPs,
      loadBalancerSourceRanges: nonEmpty(sourceRanges),
      hasSourceRanges: ranges.length > 0,
      stickyMaxAgeSeconds,
      externalPolicyLocal,
      internalPolicyLocal,
      healthCheckNodePort,
      ...(scheduler !== undefined ? { scheduler } : {}),
      ...(schedFlags !== undefined ? { schedFlags: [...new Set(schedFlags)].sort() } : {}),
    };
  });
  for (const port of ports) {
    const n = o.portNotice?.(port);
    // One notice per reason: a limit of the mode is said once for the Service, whichever port has it.
    if (n !== undefined && !notices.some((x) => x.reason === n.reason)) {
      notices.push({ reason: n.reason, msg: `${obj()}: ${n.msg}` });
    }
  }
  return { ports, warnings, notices };
}

/**
 * The empty address list every port of a Service without such addresses holds (most Services): the
 * ports are kept until the Service changes, three lists each, so one shared list, not 150,000.
 */
const NONE: readonly string[] = Object.freeze([]);

/** Returns `list`, or the shared {@linkcode NONE} when it is empty. */
function nonEmpty(list: readonly string[]): readonly string[] {
  return list.length === 0 ? NONE : list;
}

function filterAddresses(
  obj: () => string,
  field: string,
  list: unknown,
  family: IPFamily,
  warnings: string[],
): readonly string[] {
  if (!Array.isArray(list)) return NONE;
  const out: string[] = [];
  list.forEach((ip, i) => {
    const f = ipFamily(ip);
    if (f === undefined) warnings.push(`${obj()}: skipped ${field}[${i}] ${show(ip)}`);
    else if (f === family) out.push(ip as string);
  });
  return nonEmpty([...new Set(out)]);
}
