/**
 * What every source feeds (as upstream's `pkg/proxy/config/config.go`): the handler contracts, calls
 * with (old, new) pairs per kind, kube-proxy's label selector, and what a source keeps of an object
 * between its events.
 * @module
 */
import type {
  KubernetesObject,
  V1EndpointSlice,
  V1Node,
  V1Service,
  V1ServiceCIDR,
} from "@kubernetes/client-node";
import { SERVICE_NAME_LABEL } from "../model/endpoint.ts";

/**
 * Receives Service events; `onServicesSynced` once the initial list is in. An old or deleted
 * Service may be only what names it (the API source keeps no more between events: `serviceStub`).
 */
export interface ServiceHandler {
  onServiceAdd(s: V1Service): void;
  onServiceUpdate(old: V1Service, s: V1Service): void;
  onServiceDelete(s: V1Service): void;
  onServicesSynced(): void;
}

/**
 * Receives EndpointSlice events; `onEndpointSlicesSynced` once the initial list is in. An old or
 * deleted slice may be only what names it, without endpoints (`endpointSliceStub`).
 */
export interface EndpointSliceHandler {
  onEndpointSliceAdd(s: V1EndpointSlice): void;
  onEndpointSliceUpdate(old: V1EndpointSlice, s: V1EndpointSlice): void;
  onEndpointSliceDelete(s: V1EndpointSlice): void;
  onEndpointSlicesSynced(): void;
}

/** Receives events about this proxy's own Node. */
export interface NodeHandler {
  onNodeAdd(n: V1Node): void;
  onNodeUpdate(old: V1Node, n: V1Node): void;
  onNodeDelete(n: V1Node): void;
  onNodeSynced(): void;
}

/**
 * Receives the cluster's service CIDRs (every `networking.k8s.io/v1` ServiceCIDR's `spec.cidrs`,
 * both families, sorted), whole, on each change, as upstream's `OnServiceCIDRsChanged`.
 */
export interface ServiceCIDRHandler {
  onServiceCIDRsChanged(cidrs: readonly string[]): void;
}

/** What a source feeds: every handler kind. */
export type EventHandler = ServiceHandler & EndpointSliceHandler & NodeHandler & ServiceCIDRHandler;

const HEADLESS_LABEL = "service.kubernetes.io/headless";
const SERVICE_PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name";

/** kube-proxy's selector: skip headless endpoints and objects owned by another service proxy. */
export const PROXY_LABEL_SELECTOR = `!${HEADLESS_LABEL},!${SERVICE_PROXY_NAME_LABEL}`;

/**
 * Returns true when {@linkcode PROXY_LABEL_SELECTOR} selects `o`: what the file source applies
 * itself, since no API server filters for it.
 */
export function selectedByProxy(o: KubernetesObject): boolean {
  const labels = o.metadata?.labels;
  return labels === undefined || labels === null ||
    (!Object.hasOwn(labels, HEADLESS_LABEL) && !Object.hasOwn(labels, SERVICE_PROXY_NAME_LABEL));
}

/** Per-kind dispatch of (old, new) events to a handler. */
export interface KindHandler<T> {
  add(o: T): void;
  update(old: T, o: T): void;
  delete(o: T): void;
  synced(): void;
  /**
   * What a source need keep of an object between its events for this kind's handlers (absent: all
   * of it): `update` and a relist's `delete` get it back as the old object.
   */
  retain?(o: T): T;
}

/**
 * Returns what names `s` (namespace, name, version): all the Service handlers read of an old
 * object (the change trackers take a Service's ports before a change from what they applied).
 */
export function serviceStub(s: V1Service): V1Service {
  const { namespace, name, resourceVersion } = s.metadata ?? {};
  return { metadata: { namespace, name, resourceVersion } };
}

/**
 * Returns what identifies `s` to the endpoints trackers (namespace, name, its Service's label,
 * address type), without its endpoints: their handlers never read an old slice's endpoints, and
 * a removal needs only which slice of which Service went. At 10,000 slices of 10 endpoints the
 * whole objects are tens of MiB that the trackers already hold in their own form.
 */
export function endpointSliceStub(s: V1EndpointSlice): V1EndpointSlice {
  const m = s.metadata;
  return sliceStub(m?.namespace, m?.name, m?.resourceVersion, m?.labels?.[SERVICE_NAME_LABEL], s.addressType);
}

/**
 * Returns the stub ({@linkcode endpointSliceStub}) of the slice so named, of `service` (its
 * Service-name label, when it has one) and `addressType`.
 */
export function sliceStub(
  namespace: string | undefined,
  name: string | undefined,
  resourceVersion: string | undefined,
  service: string | undefined,
  addressType: string | undefined,
): V1EndpointSlice {
  return {
    addressType: addressType as string,
    endpoints: [],
    metadata: {
      namespace,
      name,
      resourceVersion,
      ...(service === undefined ? {} : { labels: { [SERVICE_NAME_LABEL]: service } }),
    },
  };
}

/**
 * Returns the per-kind (old, new) dispatch to `h`'s methods. ServiceCIDR objects are folded into
 * the set of every CIDR they hold, as upstream's ServiceCIDR config handler, reported on each change.
 */
export function kindHandlers(h: EventHandler) {
  const serviceCIDRs = new Map<string, readonly string[]>();
  const cidrsChanged = () => {
    h.onServiceCIDRsChanged([...new Set([...serviceCIDRs.values()].flat())].sort());
  };
  const setCIDRs = (o: V1ServiceCIDR) => {
    serviceCIDRs.set(objectKey(o), (o.spec?.cidrs ?? []).filter((c) => typeof c === "string"));
    cidrsChanged();
  };
  return {
    Service: {
      add: (o: V1Service) => h.onServiceAdd(o),
      update: (a: V1Service, b: V1Service) => h.onServiceUpdate(a, b),
      delete: (o: V1Service) => h.onServiceDelete(o),
      synced: () => h.onServicesSynced(),
      retain: serviceStub,
    } satisfies KindHandler<V1Service>,
    EndpointSlice: {
      add: (o: V1EndpointSlice) => h.onEndpointSliceAdd(o),
      update: (a: V1EndpointSlice, b: V1EndpointSlice) => h.onEndpointSliceUpdate(a, b),
      delete: (o: V1EndpointSlice) => h.onEndpointSliceDelete(o),
      synced: () => h.onEndpointSlicesSynced(),
      retain: endpointSliceStub,
    } satisfies KindHandler<V1EndpointSlice>,
    Node: {
      add: (o: V1Node) => h.onNodeAdd(o),
      update: (a: V1Node, b: V1Node) => h.onNodeUpdate(a, b),
      delete: (o: V1Node) => h.onNodeDelete(o),
      synced: () => h.onNodeSynced(),
    } satisfies KindHandler<V1Node>,
    ServiceCIDR: {
      add: setCIDRs,
      update: (_a: V1ServiceCIDR, b: V1ServiceCIDR) => setCIDRs(b),
      delete: (o: V1ServiceCIDR) => {
        serviceCIDRs.delete(objectKey(o));
        cidrsChanged();
      },
      // Syncs never wait for them: without any, nothing is dropped (as before they existed).
      synced: () => {},
    } satisfies KindHandler<V1ServiceCIDR>,
  };
}

/** Returns `namespace/name` (or `name` for cluster-scoped objects). */
export function objectKey(o: KubernetesObject): string {
  const ns = o.metadata?.namespace;
  return ns ? `${ns}/${o.metadata?.name}` : String(o.metadata?.name);
}
