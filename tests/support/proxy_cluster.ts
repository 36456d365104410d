/**
 * A small cluster's objects for `explain --all-nodes` tests: the Service `e2e/web` (a ClusterIP and
 * NodePort Service) and its slice, Node objects, proxy pods in kubeadm's DaemonSet shape, the file a
 * node's proxy reads, and the operator's kubeconfig.
 * @module
 */
import type { V1EndpointSlice, V1Node, V1Pod, V1Service } from "@kubernetes/client-node";

/** The Service every cluster test asks about. */
export const SERVICE = "e2e/web";
/** Its cluster IP and node port. */
export const CLUSTER_IP = "172.30.5.10";
export const NODE_PORT = 30500;
/** The pod network (`--cluster-cidr`). */
export const CLUSTER_CIDR = "10.180.0.0/16";

/** The Service `e2e/web`: port 80 (`http`) to 8080, NodePort {@linkcode NODE_PORT}. */
export function webService(): V1Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { namespace: "e2e", name: "web" },
    spec: {
      type: "NodePort",
      clusterIP: CLUSTER_IP,
      clusterIPs: [CLUSTER_IP],
      ports: [{
        name: "http",
        port: 80,
        protocol: "TCP",
        targetPort: 8080 as unknown as never,
        nodePort: NODE_PORT,
      }],
    },
  };
}

/** Its one slice: `ips` ready on port 8080, changed at `triggerMs` (the controller's trigger time). */
export function webSlice(ips: readonly string[], triggerMs: number): V1EndpointSlice {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      namespace: "e2e",
      name: "web-1",
      labels: { "kubernetes.io/service-name": "web" },
      annotations: { "endpoints.kubernetes.io/last-change-trigger-time": new Date(triggerMs).toISOString() },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: "elsewhere" })),
  };
}

/** A Node `name` with address `ip`. */
export function nodeObject(name: string, ip: string): V1Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name },
    status: { addresses: [{ type: "InternalIP", address: ip }] },
  };
}

/**
 * A proxy pod on `node`, as kubeadm's DaemonSet makes it (`/usr/local/bin/kube-proxy --config=PATH
 * --hostname-override=$(NODE_NAME)`), running and ready unless `waiting` says why it is not.
 */
export function proxyPod(name: string, node: string, config: string, o: { waiting?: string } = {}): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { namespace: "kube-system", name, labels: { "k8s-app": "kube-proxy" } },
    spec: {
      nodeName: node,
      hostNetwork: true,
      containers: [{
        name: "kube-proxy",
        image: "registry.example/kube-proxy-deno:0.1.0",
        command: ["/usr/local/bin/kube-proxy", `--config=${config}`, "--hostname-override=$(NODE_NAME)"],
        env: [{ name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } }],
      }],
    },
    status: o.waiting === undefined
      ? {
        phase: "Running",
        containerStatuses: [{
          name: "kube-proxy",
          ready: true,
          restartCount: 0,
          image: "",
          imageID: "",
          state: { running: {} },
        }],
      }
      : {
        phase: "Pending",
        containerStatuses: [{
          name: "kube-proxy",
          ready: false,
          restartCount: 0,
          image: "",
          imageID: "",
          state: { waiting: { reason: o.waiting } },
        }],
      },
  };
}

/** Objects as a file a proxy's file source reads (JSON documents are YAML). */
export function objectsFile(...objects: readonly unknown[]): string {
  return objects.map((o) => JSON.stringify(o)).join("\n---\n") + "\n";
}

/** Writes the operator's kubeconfig for `server` with `token` into `dir`; returns its path. */
export async function writeKubeconfig(dir: string, server: string, token: string): Promise<string> {
  const path = `${dir}/kubeconfig`;
  await Deno.writeTextFile(
    path,
    `apiVersion: v1
kind: Config
current-context: ops
clusters: [{ name: test, cluster: { server: "${server}" } }]
users: [{ name: ops, user: { token: "${token}" } }]
contexts: [{ name: ops, context: { cluster: test, user: ops } }]
`,
  );
  return path;
}
