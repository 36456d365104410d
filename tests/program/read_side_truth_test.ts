/**
 * The read side tells the truth where healthy nodes tripped it: an endpoint on the node's own
 * address (delivered to the node, never masqueraded), a node whose first address is inside the
 * cluster CIDR, synthetic clients that must collide with no address anything holds (another
 * Service's load-balancer IP, an endpoint, an IPv6 network address). `explain` offline in every
 * kernel mode, as operators run it: each client agrees with the rendered rules, and the model says
 * what the kernel does (`tests/e2e/explain_truth_test.ts` holds the same to real packets).
 */
import { assert, assertEquals } from "../support/assert.ts";
import { runOnce } from "../support/program.ts";

const MODES = ["iptables", "nftables", "ipvs"] as const;

/** One client line of `explain --output=json`. */
interface ClientLine {
  readonly label: string;
  readonly via: string;
  readonly connection: { readonly src: string; readonly dst: string };
  readonly expected: {
    readonly verdict: string;
    readonly endpoints: string[];
    readonly masquerade?: boolean;
  };
  readonly datapath: { readonly masquerade?: boolean; readonly endpoints: string[] } | null;
  readonly agrees: boolean | null;
  readonly disagreement?: string;
}

/** `explain SERVICE --output=json` over `yaml` in `mode`: the exit code and every client. */
async function explain(
  yaml: string,
  service: string,
  mode: string,
  extra: string[] = [],
): Promise<{ code: number; clients: ClientLine[]; stderr: string }> {
  const dir = await Deno.makeTempDir({ prefix: "kpd-truth-" });
  try {
    await Deno.writeTextFile(`${dir}/objects.yaml`, yaml);
    const r = await runOnce([
      "explain",
      service,
      `--source=file:${dir}/objects.yaml`,
      `--proxy-mode=${mode}`,
      "--cluster-cidr=10.244.0.0/16",
      "--output=json",
      ...extra,
    ]);
    const report = r.stdout === "" ? { ports: [] } : JSON.parse(r.stdout);
    return {
      code: r.code,
      clients: report.ports.flatMap((p: { clients: ClientLine[] }) => p.clients),
      stderr: r.stderr,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A Node named node-a with `addresses` (InternalIP first) and pod CIDR 10.244.1.0/24. */
function node(...addresses: string[]): string {
  const list = addresses.map((a, i) => `{ type: ${i === 0 ? "InternalIP" : "ExternalIP"}, address: ${a} }`);
  return `apiVersion: v1
kind: Node
metadata: { name: node-a }
spec: { podCIDR: 10.244.1.0/24, podCIDRs: [10.244.1.0/24] }
status: { addresses: [${list.join(", ")}] }
`;
}

/** A Service with its one slice of `endpoints` (`ip@node`), on `clusterIP` port 80 -> 9100. */
function service(
  name: string,
  clusterIP: string,
  endpoints: string[],
  spec = "  type: NodePort\n",
  status = "",
): string {
  const family = clusterIP.includes(":") ? "IPv6" : "IPv4";
  // NodePort and LoadBalancer Services take 30000 + the cluster IP's last number.
  const last = clusterIP.split(/[.:]/).at(-1)!;
  const nodePort = /NodePort|LoadBalancer/.test(spec)
    ? `, nodePort: ${30000 + (family === "IPv6" ? parseInt(last, 16) : Number(last))}`
    : "";
  return `---
apiVersion: v1
kind: Service
metadata: { namespace: ns, name: ${name} }
spec:
${spec}  clusterIP: ${clusterIP}
  clusterIPs: [${clusterIP}]
  ports: [{ name: http, protocol: TCP, port: 80, targetPort: 9100${nodePort} }]
${status}---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: ns, name: ${name}-1, labels: { kubernetes.io/service-name: ${name} } }
addressType: ${family}
ports: [{ name: http, protocol: TCP, port: 9100 }]
endpoints:
${
    endpoints.map((e) => {
      const [ip, on] = e.split("@");
      return `  - { addresses: ["${ip}"], conditions: { ready: true }, nodeName: ${on} }\n`;
    }).join("")
  }`;
}

/** The line for `label` reached through `via`. */
function client(clients: ClientLine[], label: string, via: string): ClientLine {
  const c = clients.find((x) => x.label === label && x.via === via);
  assert(c !== undefined, `${label} (${via}) in ${clients.map((x) => `${x.label} (${x.via})`).join("; ")}`);
  return c;
}

Deno.test("read side truth: an endpoint on the node's own address is delivered to the node, never masqueraded, in every kernel mode", async () => {
  // A hostNetwork exporter: its endpoint is the node's address.
  const yaml = node("192.168.1.5") + service("exporter", "172.30.0.90", ["192.168.1.5@node-a"]);
  for (const mode of MODES) {
    const r = await explain(yaml, "ns/exporter", mode);
    assertEquals(r.code, 0, `${mode}: ${r.stderr}${JSON.stringify(r.clients, null, 1)}`);
    for (const c of r.clients) assertEquals(c.agrees, true, `${mode}, ${c.label}: ${c.disagreement}`);
    // From outside the node: prerouting, DNAT, input; postrouting (where masquerading is) never.
    const external = client(r.clients, "an external client", "NodePort");
    assertEquals([external.expected.masquerade, external.datapath?.masquerade], [false, false], mode);
    const pod = client(r.clients, "a pod on this node", "cluster IP");
    assertEquals([pod.expected.masquerade, pod.datapath?.masquerade], [false, false], mode);
  }
  // Beside a pod endpoint, the paths differ: neither the model nor the rules say one answer.
  const mixed = node("192.168.1.5") +
    service("mixed", "172.30.0.91", ["192.168.1.5@node-a", "10.244.2.7@node-b"]);
  for (const mode of MODES) {
    const r = await explain(mixed, "ns/mixed", mode);
    assertEquals(r.code, 0, `${mode}: ${JSON.stringify(r.clients.map((c) => c.disagreement))}`);
    const external = client(r.clients, "an external client", "NodePort");
    assertEquals([external.expected.masquerade, external.datapath?.masquerade], [undefined, undefined], mode);
  }
});

Deno.test("read side truth: a node address inside the cluster CIDR is classified as the rules do (kept), not as the node", async () => {
  // A bridge CNI's gateway address first among the node's.
  const yaml = node("10.244.1.1", "192.168.1.5") +
    service("web", "172.30.0.92", ["10.244.1.20@node-a", "10.244.2.20@node-b"]);
  for (const mode of ["iptables", "nftables"]) {
    const r = await explain(yaml, "ns/web", mode);
    assertEquals(r.code, 0, `${mode}: ${JSON.stringify(r.clients.map((c) => c.disagreement))}`);
    const n = client(r.clients, "this node", "cluster IP");
    assertEquals(n.connection.src, "10.244.1.1");
    // `! -s 10.244.0.0/16` (nftables: `ip saddr != 10.244.0.0/16`) does not mark it.
    assertEquals([n.expected.masquerade, n.datapath?.masquerade], [false, false], mode);
  }
});

Deno.test("read side truth: synthetic clients take no address any Service, endpoint or the node holds; IPv6 ones are host addresses", async () => {
  // Another Service holds the load-balancer IP the external client would take, and an endpoint the
  // pod client's.
  const yaml = node("192.168.1.5") +
    service("web", "172.30.0.93", ["10.244.1.10@node-a", "10.244.2.10@node-b"]) +
    service(
      "lb",
      "172.30.0.94",
      ["10.244.2.11@node-b"],
      "  type: LoadBalancer\n",
      "status: { loadBalancer: { ingress: [{ ip: 203.0.113.10 }] } }\n",
    );
  const held = ["203.0.113.10", "10.244.1.10", "10.244.2.10", "10.244.2.11", "192.168.1.5", "172.30.0.94"];
  for (const mode of MODES) {
    const r = await explain(yaml, "ns/web", mode);
    assertEquals(r.code, 0, `${mode}: ${JSON.stringify(r.clients.map((c) => c.disagreement))}`);
    for (const c of r.clients) {
      if (c.label === "this node") continue;
      assert(!held.includes(c.connection.src), `${mode}, ${c.label}: ${c.connection.src} is held`);
    }
  }
  const v6 = `${node("192.168.1.5", "fd00:1::5")}${service("v6", "fd00:30::95", ["fd00:244:2::7@node-b"])}`;
  for (const mode of ["iptables", "nftables"]) {
    const r = await explain(v6, "ns/v6", mode, ["--cluster-cidr=fd00:244::/48"]);
    assertEquals(r.code, 0, `${mode}: ${r.stderr}${JSON.stringify(r.clients.map((c) => c.disagreement))}`);
    for (const c of r.clients) {
      assert(
        !c.connection.src.endsWith("::"),
        `${mode}, ${c.label}: ${c.connection.src} is a network address`,
      );
    }
  }
});
