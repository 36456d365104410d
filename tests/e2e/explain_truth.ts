/**
 * `explain` held to real packets: for a matrix of Services (ClusterIP, NodePort with
 * externalTrafficPolicy Cluster and Local, a LoadBalancer with source ranges, externalIPs, ClientIP
 * affinity used and unused, an endpoint on the node's own address, hairpin, no endpoints,
 * dual-stack) and every kind of client explain knows (a pod on this node, one the Service sends to
 * and one it does not; the node itself,
 * external clients inside and outside the ranges, the node on 127.0.0.1), on a node whose first
 * interface holds an address inside the cluster CIDR (a bridge CNI's gateway), the running proxy's
 * `/debug/services` answer for each real client is compared with a real connection from that
 * client: which endpoint answered and the source address it saw, or refused, or dropped. Every
 * client must agree with the rules (no DISAGREEMENT, nothing unchecked) and the packets must do
 * what explain said. The host runs it for iptables and nftables; the VM guest for ipvs.
 * @module
 */
import { assert, assertEquals } from "../support/assert.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import { eventually } from "../support/net_helpers.ts";
import { type Agent, Topology } from "./netns.ts";
import { addIPv6, V6 } from "./ipv6.ts";

/** One client line of explain's JSON (schema kube-proxy-deno.explain/v1), as far as this reads it. */
interface Line {
  readonly client: "pod" | "node" | "external";
  readonly via: string;
  readonly label: string;
  readonly connection: { readonly src: string; readonly dst: string; readonly port: number };
  readonly expected: {
    readonly verdict: string;
    readonly endpoints: string[];
    readonly masquerade?: boolean;
  };
  readonly datapath: { readonly pinned?: { readonly endpoint: string } } | null;
  readonly agrees: boolean | null;
  readonly disagreement?: string;
}

/** A Service of the matrix: its objects, and which of its clients answer for real. */
interface Case {
  readonly name: string;
  readonly yaml: string;
  /** Family of the pod client asked about (both for the dual-stack Service). */
  readonly families?: ReadonlyArray<"IPv4" | "IPv6">;
}

const PORT = 9090;
/** A Service `name` on port 80 -> 9090 with `extra` spec lines, and its slices: `eps` per family. */
function service(
  name: string,
  ips: readonly string[],
  o: { type?: string; nodePort?: number; spec?: string; status?: string; eps: Record<string, string[]> },
): string {
  const nodePort = o.nodePort === undefined ? "" : `, nodePort: ${o.nodePort}`;
  const slices = Object.entries(o.eps).map(([family, eps]) =>
    `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ${name}-${
      family === "IPv4" ? "v4" : "v6"
    }, labels: { kubernetes.io/service-name: ${name} } }
addressType: ${family}
ports: [{ name: p, protocol: TCP, port: ${name === "hostnet" ? 9100 : PORT} }]
endpoints:${
      eps.length === 0 ? " []" : "\n" + eps.map((e) => {
        const [ip, node] = e.split("@");
        return `  - { addresses: ["${ip}"], conditions: { ready: true }, nodeName: ${node ?? "node-a"} }`;
      }).join("\n")
    }
`
  ).join("");
  return `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ${name} }
spec:
  type: ${o.type ?? "ClusterIP"}
  clusterIP: ${ips[0]}
  clusterIPs: [${ips.join(", ")}]
${ips.length > 1 ? "  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [IPv4, IPv6]\n" : ""}${
    o.spec ?? ""
  }  ports: [{ name: p, protocol: TCP, port: 80, targetPort: ${name === "hostnet" ? 9100 : PORT}${nodePort} }]
${o.status ?? ""}${slices}`;
}

/** The matrix of Services; `a` and `b` are the pods' IPv4 addresses. */
function cases(a: string, b: string): Case[] {
  const both = { IPv4: [a, b] };
  return [
    { name: "cluster", yaml: service("cluster", ["172.30.1.1"], { eps: both }) },
    {
      name: "np-cluster",
      yaml: service("np-cluster", ["172.30.1.2"], { type: "NodePort", nodePort: 30102, eps: both }),
    },
    {
      name: "np-local",
      yaml: service("np-local", ["172.30.1.3"], {
        type: "NodePort",
        nodePort: 30103,
        spec: "  externalTrafficPolicy: Local\n",
        eps: { IPv4: [a, `${b}@node-b`] },
      }),
    },
    {
      name: "lb-ranges",
      yaml: service("lb-ranges", ["172.30.1.4"], {
        type: "LoadBalancer",
        nodePort: 30104,
        spec: "  loadBalancerSourceRanges: [192.168.0.10/32]\n",
        status: "status: { loadBalancer: { ingress: [{ ip: 192.168.99.64 }] } }\n",
        eps: both,
      }),
    },
    {
      name: "extip",
      yaml: service("extip", ["172.30.1.5"], { spec: "  externalIPs: [192.168.99.65]\n", eps: both }),
    },
    {
      name: "sticky-used",
      yaml: service("sticky-used", ["172.30.1.6"], {
        type: "NodePort",
        nodePort: 30106,
        spec: "  sessionAffinity: ClientIP\n",
        eps: both,
      }),
    },
    {
      name: "sticky-unused",
      yaml: service("sticky-unused", ["172.30.1.7"], { spec: "  sessionAffinity: ClientIP\n", eps: both }),
    },
    // A hostNetwork endpoint: the node's own address.
    {
      name: "hostnet",
      yaml: service("hostnet", ["172.30.1.8"], {
        type: "NodePort",
        nodePort: 30108,
        eps: { IPv4: ["192.168.0.2"] },
      }),
    },
    { name: "hairpin", yaml: service("hairpin", ["172.30.1.9"], { eps: { IPv4: [a] } }) },
    {
      name: "noeps",
      yaml: service("noeps", ["172.30.1.10"], { type: "NodePort", nodePort: 30110, eps: { IPv4: [] } }),
    },
    {
      name: "dual",
      families: ["IPv4", "IPv6"],
      yaml: service("dual", ["172.30.1.11", "fd00:30::11"], {
        type: "NodePort",
        nodePort: 30111,
        eps: { IPv4: both.IPv4, IPv6: [V6.pod(1), V6.pod(2)] },
      }),
    },
  ];
}

/** What a real connection got: the endpoint that answered and the source it saw, or how it failed. */
type Seen = { endpoint: string; source: string } | { failed: "refused" | "timeout" | string };

async function connect(agent: Agent, dst: string, port: number, timeoutMs: number): Promise<Seen> {
  const r = await agent.tcp(dst, port, timeoutMs);
  if (!r.startsWith("ERR")) {
    const [endpoint, source] = r.split(" ");
    return { endpoint, source };
  }
  return { failed: /refused/i.test(r) ? "refused" : /timed? ?out/i.test(r) ? "timeout" : r };
}

/**
 * Registers the differential test of `mode`: the real program (as `deno task start` starts it,
 * with `args` besides the source, node name and servers) in namespaces this test creates.
 */
export async function explainTruthTest(
  mode: string,
  args: readonly string[],
  tools: readonly string[],
): Promise<void> {
  const { ignore, note } = await realKernel([...tools, "ip6tables"].filter((x, i, a) => a.indexOf(x) === i));
  Deno.test({
    name:
      `explain truth ${mode}: every client's answer on a live node matches a real connection from it${note}`,
    ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const t = new Topology();
      const dir = await Deno.makeTempDir({ prefix: `kpd-truth-${mode}-` });
      let proxy;
      let done = false;
      try {
        await t.init();
        // A bridge CNI's gateway, inside the cluster CIDR, on an interface before the node's uplink:
        // the node's own connections still leave from the address the kernel routes them by.
        await t.exec(t.node, ["ip", "link", "set", "br0", "down"]);
        await t.exec(t.node, ["ip", "link", "del", "br0"]);
        await t.exec(t.node, ["ip", "link", "add", "kpdcni0", "type", "bridge"]);
        await t.exec(t.node, ["ip", "addr", "add", "10.180.250.1/24", "dev", "kpdcni0"]);
        await t.exec(t.node, ["ip", "link", "set", "kpdcni0", "up"]);
        await t.exec(t.node, ["ip", "link", "add", "br0", "type", "bridge"]);
        await t.exec(t.node, ["ip", "addr", "add", `${t.nodeIP}/24`, "dev", "br0"]);
        await t.exec(t.node, ["ip", "link", "set", "br0", "up"]);
        await t.exec(t.node, ["ip", "route", "add", "default", "via", "192.168.0.1", "dev", "br0", "onlink"]);
        // pod-a and pod-b serve; pod-c is a client only (pod-a a client too: of Services it serves).
        const pods = [
          await t.addPod("pod-a", 8080),
          await t.addPod("pod-b", 8080),
          await t.addPod("pod-c", 8080),
        ];
        const admitted = await t.addClient(); // 192.168.0.10, inside the source ranges
        const refused = await t.addClient(); // 192.168.0.11
        await addIPv6(t, pods, [admitted, refused]);
        for (const [i, p] of pods.entries()) {
          assert(
            (await p.agent.request({ op: "whoami", name: `pod-${"ab"[i]}`, port: PORT, hostname: "::" })).ok,
          );
        }
        assert((await t.nodeAgent.request({ op: "whoami", name: "node", port: 9100, hostname: "::" })).ok);
        const name = new Map<string, string>([
          [`${pods[0].ip}:${PORT}`, "pod-a"],
          [`${pods[1].ip}:${PORT}`, "pod-b"],
          [`[${V6.pod(1)}]:${PORT}`, "pod-a"],
          [`[${V6.pod(2)}]:${PORT}`, "pod-b"],
          [`${t.nodeIP}:9100`, "node"],
        ]);
        const matrix = cases(pods[0].ip, pods[1].ip);
        await Deno.writeTextFile(`${dir}/objects.yaml`, matrix.map((c) => c.yaml).join(""));
        proxy = t.startProxy([
          `--proxy-mode=${mode}`,
          `--source=file:${dir}`,
          "--hostname-override=node-a",
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
          "--cluster-cidr=10.180.0.0/16,fd00:180::/48",
          ...args,
        ]);
        const node = t.nodeAgent;
        await eventually(
          async () => assert(!(await node.tcp("172.30.1.1", 80)).startsWith("ERR")),
          CONVERGE_MS,
        );
        // ClientIP affinity in use: the node and a client have entries before anything is asked.
        for (let i = 0; i < 3; i++) {
          await node.tcp("172.30.1.6", 80);
          await admitted.agent.tcp(t.nodeIP, 30106);
        }
        const report = async (svc: string, client: string): Promise<Line[]> => {
          const r = await node.http(
            "127.0.0.1",
            10249,
            ANSWER_MS * 3,
            `/debug/services/e2e/${svc}?client=${client}`,
          );
          assert(r.startsWith("200 "), `${svc} ?client=${client}: ${r}`);
          return JSON.parse(r.slice(4)).ports.flatMap((p: { clients: Line[] }) => p.clients);
        };
        let checked = 0;
        const wrong: string[] = [];
        for (const c of matrix) {
          const asked: Array<{ line: Line; agent: Agent }> = [];
          // Each real pod asks as itself (`?client=`): pod-c, which no Service sends to, and pod-a, an
          // endpoint of most (it may reach itself). The node's line is the same in every report.
          const askers = (c.families ?? ["IPv4"]).flatMap((family) =>
            [pods[2], pods[0]].map((p, n) => ({
              pod: p,
              ip: family === "IPv4" ? p.ip : V6.pod(n === 0 ? 3 : 1),
            }))
          );
          for (const [i, { pod, ip }] of askers.entries()) {
            for (const l of await report(c.name, ip)) {
              if (l.client === "pod" && l.connection.src === ip) asked.push({ line: l, agent: pod.agent });
              if (l.client === "node" && i === 0) asked.push({ line: l, agent: node });
            }
          }
          for (const client of [admitted, refused]) {
            for (const l of await report(c.name, client.ip)) {
              if (l.client === "external" && l.connection.src === client.ip) {
                asked.push({ line: l, agent: client.agent });
              }
            }
          }
          for (const { line, agent } of asked) {
            const where =
              `${mode} ${c.name}, ${line.label} (${line.via}) -> ${line.connection.dst}:${line.connection.port}`;
            if (line.agrees !== true) {
              wrong.push(
                `${where}: explain ${
                  line.agrees === false ? `DISAGREEMENT ${line.disagreement}` : "did not check"
                }`,
              );
              continue;
            }
            const e = line.expected;
            if (e.verdict === "none") continue; // nothing of the proxy's answers there: nothing to hold
            const seen = await connect(
              agent,
              line.connection.dst,
              line.connection.port,
              e.verdict === "DROP" ? 1500 : ANSWER_MS,
            );
            checked++;
            if (e.verdict === "REJECT" || e.verdict === "DROP") {
              const want = e.verdict === "REJECT" ? "refused" : "timeout";
              if (!("failed" in seen) || seen.failed !== want) {
                wrong.push(`${where}: explain ${e.verdict}, the packet ${JSON.stringify(seen)}`);
              }
              continue;
            }
            if ("failed" in seen) {
              wrong.push(
                `${where}: explain DNAT to ${e.endpoints.join(", ")}, the connection ${seen.failed}`,
              );
              continue;
            }
            const reachable = new Set(e.endpoints.map((ep) => name.get(ep) ?? ep));
            const pinned = line.datapath?.pinned?.endpoint;
            if (pinned !== undefined && name.get(pinned) !== seen.endpoint) {
              wrong.push(`${where}: explain pins it to ${pinned}, ${seen.endpoint} answered`);
            } else if (!reachable.has(seen.endpoint)) {
              wrong.push(
                `${where}: ${seen.endpoint} answered, explain says only ${[...reachable].join(", ")}`,
              );
            }
            const kept = seen.source === line.connection.src;
            if (e.masquerade !== undefined && e.masquerade === kept) {
              wrong.push(
                `${where}: explain says ${
                  e.masquerade ? "masqueraded" : "kept"
                }, ${seen.endpoint} saw ${seen.source}`,
              );
            }
          }
        }
        console.log(
          `explain truth ${mode}: ${checked} real connections held to explain's answers, ${matrix.length} Services`,
        );
        assertEquals(wrong, []);
        assert(checked >= 25, `the matrix ran: ${checked} connections`);
        done = true;
      } finally {
        if (proxy !== undefined) {
          await proxy.stop();
          if (!done) console.error(`proxy log (${mode}):\n${proxy.log().split("\n").slice(-40).join("\n")}`);
        }
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
