/**
 * The field names of the kinds the file source reads (Kubernetes 1.36's Service, EndpointSlice,
 * ServiceCIDR; a Node's top level and metadata), so a misspelt field in a file (`sessionAfinity`,
 * `targetport`) is named instead of silently doing nothing. The API server prunes unknown fields
 * and `kubectl apply` refuses them; files have neither, so the source says it here. Only names are
 * checked: what a field holds is the model's validation's business.
 * @module
 */

/** What a field may hold, as far as names go: anything, an object of known fields, or a list of one. */
export type Shape = true | { readonly [field: string]: Shape } | readonly [Shape];

const CONDITION: Shape = {
  type: true,
  status: true,
  observedGeneration: true,
  lastTransitionTime: true,
  reason: true,
  message: true,
};

const OBJECT_META: Shape = {
  name: true,
  generateName: true,
  namespace: true,
  selfLink: true,
  uid: true,
  resourceVersion: true,
  generation: true,
  creationTimestamp: true,
  deletionTimestamp: true,
  deletionGracePeriodSeconds: true,
  labels: true,
  annotations: true,
  ownerReferences: [{
    apiVersion: true,
    kind: true,
    name: true,
    uid: true,
    controller: true,
    blockOwnerDeletion: true,
  }],
  finalizers: true,
  managedFields: [{
    manager: true,
    operation: true,
    apiVersion: true,
    time: true,
    fieldsType: true,
    fieldsV1: true,
    subresource: true,
  }],
};

const SERVICE: Shape = {
  apiVersion: true,
  kind: true,
  metadata: OBJECT_META,
  spec: {
    ports: [{ name: true, protocol: true, appProtocol: true, port: true, targetPort: true, nodePort: true }],
    selector: true,
    clusterIP: true,
    clusterIPs: true,
    type: true,
    externalIPs: true,
    sessionAffinity: true,
    loadBalancerIP: true,
    loadBalancerSourceRanges: true,
    externalName: true,
    externalTrafficPolicy: true,
    healthCheckNodePort: true,
    publishNotReadyAddresses: true,
    sessionAffinityConfig: { clientIP: { timeoutSeconds: true } },
    ipFamilies: true,
    ipFamilyPolicy: true,
    allocateLoadBalancerNodePorts: true,
    loadBalancerClass: true,
    internalTrafficPolicy: true,
    trafficDistribution: true,
  },
  status: {
    loadBalancer: {
      ingress: [{
        ip: true,
        hostname: true,
        ipMode: true,
        ports: [{ port: true, protocol: true, error: true }],
      }],
    },
    conditions: [CONDITION],
  },
};

const ENDPOINT_SLICE: Shape = {
  apiVersion: true,
  kind: true,
  metadata: OBJECT_META,
  addressType: true,
  endpoints: [{
    addresses: true,
    conditions: { ready: true, serving: true, terminating: true },
    hostname: true,
    targetRef: {
      kind: true,
      namespace: true,
      name: true,
      uid: true,
      apiVersion: true,
      resourceVersion: true,
      fieldPath: true,
    },
    deprecatedTopology: true,
    nodeName: true,
    zone: true,
    hints: { forZones: [{ name: true }], forNodes: [{ name: true }] },
  }],
  ports: [{ name: true, protocol: true, port: true, appProtocol: true }],
};

const SERVICE_CIDR: Shape = {
  apiVersion: true,
  kind: true,
  metadata: OBJECT_META,
  spec: { cidrs: true },
  status: { conditions: [CONDITION] },
};

/** A Node's spec and status are large and the proxy reads little of them: their insides are not checked. */
const NODE: Shape = { apiVersion: true, kind: true, metadata: OBJECT_META, spec: true, status: true };

/** The shape of each kind the file source reads. */
export const KIND_SHAPES: Readonly<Record<string, Shape>> = {
  Service: SERVICE,
  EndpointSlice: ENDPOINT_SLICE,
  ServiceCIDR: SERVICE_CIDR,
  Node: NODE,
};

/**
 * Returns the paths of the fields of `value` that `shape` does not know (`spec.sessionAfinity`,
 * `spec.ports[0].targetport`), in document order; empty when every name is known. Values of the
 * wrong type are not descended into.
 */
export function unknownFields(value: unknown, shape: Shape, path = ""): string[] {
  if (shape === true || value === null || typeof value !== "object") return [];
  if (Array.isArray(shape)) {
    return Array.isArray(value) ? value.flatMap((v, i) => unknownFields(v, shape[0], `${path}[${i}]`)) : [];
  }
  if (Array.isArray(value)) return [];
  const known = shape as { readonly [field: string]: Shape };
  const out: string[] = [];
  for (const [k, v] of Object.entries(value)) {
    const at = path === "" ? k : `${path}.${k}`;
    if (Object.hasOwn(known, k)) out.push(...unknownFields(v, known[k], at));
    else out.push(at);
  }
  return out;
}
