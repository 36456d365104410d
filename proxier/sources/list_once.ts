/**
 * The API source read once, for the read side (`migrate`): Services, EndpointSlices, the own Node
 * and ServiceCIDRs listed with kube-proxy's selectors and fed to a handler as a proxy's informers
 * feed it, then each kind marked synced. Nothing is watched.
 * @module
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import type { ApiAccess } from "./api_access.ts";
import { ApiClient, type SourceKind, sourceQueries } from "./api_client.ts";
import { type EventHandler, type KindHandler, kindHandlers } from "./handlers.ts";

/**
 * Lists every kind once and feeds `handler`. ServiceCIDRs are optional (an API server or role
 * without them: none). @throws {Error} naming the kind whose list failed.
 */
export async function listOnce(access: ApiAccess, nodeName: string, handler: EventHandler): Promise<void> {
  const api = new ApiClient(access);
  const h = kindHandlers(handler) as unknown as Record<SourceKind, KindHandler<KubernetesObject>>;
  const queries = sourceQueries(nodeName);
  for (const kind of ["Node", "ServiceCIDR", "Service", "EndpointSlice"] as const) {
    let items: KubernetesObject[];
    try {
      items = (await api.list(queries[kind].path, queries[kind].query)).items;
    } catch (e) {
      if (kind === "ServiceCIDR") continue;
      throw new Error(`listing ${kind}s: ${(e as Error).message}`, { cause: e });
    }
    for (const o of items) h[kind].add(o);
    h[kind].synced();
  }
}
