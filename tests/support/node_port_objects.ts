/**
 * The smallest node a proxy test needs, as a file source reads it: node-a (192.168.0.2) and one
 * NodePort Service `e2e/NAME` (172.30.0.10:80, to 10.180.0.4:8080).
 * @module
 */

/** Returns the objects file with Service `name` on node port `nodePort`. */
export function nodePortObjects(name = "web", nodePort = 30080): string {
  return `apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: 192.168.0.2 }] }
---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ${name} }
spec:
  type: NodePort
  clusterIP: 172.30.0.10
  clusterIPs: [172.30.0.10]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: ${nodePort} }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ${name}-1, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints: [{ addresses: [10.180.0.4], conditions: { ready: true } }]
`;
}
