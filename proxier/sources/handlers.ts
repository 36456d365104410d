/**
 * What every source feeds: handler calls with (old, new) pairs per kind, and kube-proxy's label
 * selector.
 * @module
 */
import type { KubernetesObject, V1EndpointSlice, V1Node, V1Service } from "@kubernetes/client-node";
import type { EndpointSliceHandler, NodeHandler, ServiceHandler } from "../base_proxier.ts";

/** What a source feeds: every handler kind. */
export type EventHandler = ServiceHandler & EndpointSliceHandler & NodeHandler;

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
}

/** Returns the per-kind (old, new) dispatch to `h`'s methods. */
export function kindHandlers(h: EventHandler) {
  return {
    Service: {
      add: (o: V1Service) => h.onServiceAdd(o),
      update: (a: V1Service, b: V1Service) => h.onServiceUpdate(a, b),
      delete: (o: V1Service) => h.onServiceDelete(o),
      synced: () => h.onServicesSynced(),
    } satisfies KindHandler<V1Service>,
    EndpointSlice: {
      add: (o: V1EndpointSlice) => h.onEndpointSliceAdd(o),
      update: (a: V1EndpointSlice, b: V1EndpointSlice) => h.onEndpointSliceUpdate(a, b),
      delete: (o: V1EndpointSlice) => h.onEndpointSliceDelete(o),
      synced: () => h.onEndpointSlicesSynced(),
    } satisfies KindHandler<V1EndpointSlice>,
    Node: {
      add: (o: V1Node) => h.onNodeAdd(o),
      update: (a: V1Node, b: V1Node) => h.onNodeUpdate(a, b),
      delete: (o: V1Node) => h.onNodeDelete(o),
      synced: () => h.onNodeSynced(),
    } satisfies KindHandler<V1Node>,
  };
}

/** Returns `namespace/name` (or `name` for cluster-scoped objects). */
export function objectKey(o: KubernetesObject): string {
  const ns = o.metadata?.namespace;
  return ns ? `${ns}/${o.metadata?.name}` : String(o.metadata?.name);
}
