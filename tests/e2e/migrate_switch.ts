/**
 * `migrate` proven by switching for real (the scenario; `migrate_switch_test.ts` walks the modes
 * this kernel runs, `tests/vm/guest/migrate_switch_ipvs.guest.ts` every pair with ipvs in the VM):
 * on a namespace node with two interfaces, pods on and off the node, a hostNetwork endpoint,
 * externalTrafficPolicy Local, source ranges, ClientIP affinity in use and an address two Services
 * claim, the running proxy is moved along a walk of modes. Before each move every client x Service
 * connection is made for real (which endpoint answered, the source it saw, refused, closed or
 * dropped) and `migrate --to` is asked live; after the move the same connections are made again.
 * Each connection must do what migrate said it did before and does after; every connection that
 * changed must be one migrate named (0 misses), and every change migrate named must show (0 false
 * changes). The program runs as `deno task start` does.
 * @module
 */
import { assert, assertEquals } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";
import { type Agent, Topology } from "./netns.ts";

const PORT = 9090; // the whoami servers (each pod serves its name on 8080 too)
const OTHER = "10.99.0.1"; // the node's second interface, not the Node object's address
const LB = "192.168.99.64";

/**
 * A Service `name` on port 80 (and `nodePort`, when given) with `spec` lines and `status`, and its
 * slice of `eps` (`ip[:port][@node]`, port 8080 by default).
 */
function service(
  name: string,
  ip: string,
  eps: readonly string[],
  o: { spec?: string; nodePort?: number; status?: string } = {},
): string {
  const port = eps[0]?.includes(":") ? Number(eps[0].split(":")[1].split("@")[0]) : PORT;
  const nodePort = o.nodePort === undefined ? "" : `, nodePort: ${o.nodePort}`;
  const endpoints = eps.map((e) => {
    const [addr, node] = e.split("@");
    return `  - { addresses: [${addr.split(":")[0]}], conditions: { ready: true }, nodeName: ${
      node ?? "node-a"
    } }`;
  });
  return `---
apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ${name} }
spec:
  clusterIP: ${ip}
  clusterIPs: [${ip}]
${o.spec ?? ""}  ports: [{ name: p, protocol: TCP, port: 80, targetPort: ${port}${nodePort} }]
${o.status ?? ""}---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ${name}-1, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: ${port} }]
endpoints:${eps.length === 0 ? " []" : `\n${endpoints.join("\n")}`}
`;
}

/** The objects: a and b are the serving pods' addresses (b declared on another node where asked). */
function objects(a: string, b: string): string {
  const np = "  type: NodePort\n";
  return `apiVersion: v1
kind: Node
metadata: { name: node-a }
status: { addresses: [{ type: InternalIP, address: 192.168.0.2 }] }
` +
    service("cluster", "172.30.2.1", [a, b]) +
    service("np", "172.30.2.2", [a, `${b}@node-b`], { spec: np, nodePort: 30200 }) +
    service("local", "172.30.2.3", [a, `${b}@node-b`], {
      spec: `${np}  externalTrafficPolicy: Local\n`,
      nodePort: 30201,
    }) +
    service("lb", "172.30.2.4", [a], {
      spec: "  type: LoadBalancer\n  loadBalancerSourceRanges: [192.168.0.10/32]\n",
      nodePort: 30202,
      status: `status: { loadBalancer: { ingress: [{ ip: ${LB} }] } }\n`,
    }) +
    service("sticky", "172.30.2.5", [a, b], { spec: "  sessionAffinity: ClientIP\n" }) +
    service("hostnet", "172.30.2.6", ["192.168.0.2:9100"], { spec: np, nodePort: 30203 }) +
    service("web", "172.30.2.10", [b]) +
    // Its external IP is web's cluster IP: it wins the address (its name sorts first).
    service("claim", "172.30.2.11", [a], { spec: "  externalIPs: [172.30.2.10]\n" });
}

/** What a connection did, three times over: the endpoints that answered and the sources they saw, or how it failed. */
interface Seen {
  readonly kind: "answered" | "refused" | "closed" | "timeout";
  readonly endpoints: ReadonlySet<string>;
  readonly sources: ReadonlySet<string>;
}

/**
 * Makes the connection three times; `firstMs` bounds the first try (a connection migrate says is
 * dropped is given 1.5 s, one it says is answered or refused the suite's answer bound, so a slow
 * emulated guest is not taken for a drop), and every try after a timeout 1.5 s.
 */
async function see(agent: Agent, dst: string, port: number, firstMs: number): Promise<Seen> {
  const endpoints = new Set<string>();
  const sources = new Set<string>();
  const failures = new Set<Seen["kind"]>();
  for (let i = 0; i < 3; i++) {
    const r = await agent.tcp(dst, port, failures.has("timeout") ? 1500 : firstMs);
    if (r === "") failures.add("closed");
    else if (r.startsWith("ERR")) failures.add(/refused|reset/i.test(r) ? "refused" : "timeout");
    else {
      const [name, source] = r.trim().split(" ");
      endpoints.add(name);
      sources.add(source);
    }
  }
  const kind = endpoints.size > 0 ? "answered" : failures.has("timeout") ? "timeout" : [...failures][0];
  return { kind, endpoints, sources };
}

/** What migrate said of one connection: `DNAT to ... (...)`, `REJECT`, `DROP`, `not a service ...`. */
interface Said {
  readonly kind: Seen["kind"] | "none" | "unknown";
  readonly endpoints?: readonly string[];
  /** Whose address the endpoint sees: the client's, the node's, or not said. */
  readonly source?: "client" | "node";
}

function said(text: string, names: ReadonlyMap<string, string>): Said {
  if (text.startsWith("DNAT to ")) {
    const eps = text.slice(8).split(" (")[0].split(", ").map((e) => names.get(e) ?? e);
    const source = / \(source kept\)/.test(text)
      ? "client"
      : / \((masqueraded|the proxy connects)/.test(text)
      ? "node"
      : undefined;
    return { kind: "answered", endpoints: eps, source };
  }
  if (text.startsWith("REJECT (a proxy")) return { kind: "closed" };
  if (text === "REJECT") return { kind: "refused" };
  if (text === "DROP") return { kind: "timeout" };
  if (text.startsWith("not a service")) return { kind: "none" };
  return { kind: "unknown" };
}

/** Whether `s` is what `p` predicts for a connection from `src` (`node`: the node's own, any source). */
function matches(p: Said, s: Seen, src: string | "node"): boolean {
  if (p.kind === "unknown") return true;
  if (p.kind === "none") return s.kind !== "answered";
  if (p.kind !== s.kind) return false;
  if (p.kind !== "answered") return true;
  if (![...s.endpoints].every((e) => p.endpoints!.includes(e))) return false;
  if (p.source === undefined || src === "node") return true;
  return [...s.sources].every((x) => (x === src) === (p.source === "client"));
}

/** One real connection of the test's own: who makes it, from where, to where. */
interface Conn {
  readonly who: "pod" | "node" | "loopback" | "external" | "inside" | "outside";
  readonly agent: Agent;
  /** Its source address, or `node` for the node's own (any of its addresses). */
  readonly src: string;
  readonly dst: string;
  readonly port: number;
}

/** One row of migrate's JSON `connections`. */
interface Row {
  readonly service: string;
  readonly client: string;
  readonly connection: { readonly src: string; readonly dst: string; readonly port: number };
  readonly before: string;
  readonly after: string;
  readonly changed: boolean;
}

/**
 * Moves the running proxy along `walk` (each consecutive pair one switch) and returns, per switch,
 * its counts (connections compared, changes predicted, misses, false changes) and every connection
 * that did not do what migrate said.
 */
export async function migrateSwitch(walk: readonly string[]): Promise<{ counts: string[]; wrong: string[] }> {
  const t = new Topology();
  const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-switch-" });
  let proxy: ReturnType<Topology["startProxy"]> | undefined;
  try {
    await t.init();
    await t.exec(t.node, ["ip", "link", "add", "kpdx0", "type", "bridge"]);
    await t.exec(t.node, ["ip", "addr", "add", `${OTHER}/24`, "dev", "kpdx0"]);
    await t.exec(t.node, ["ip", "link", "set", "kpdx0", "up"]);
    const [podA, podB, podC] = [
      await t.addPod("pod-a", 8080),
      await t.addPod("pod-b", 8080),
      await t.addPod("pod-c", 8080),
    ];
    for (const [p, name] of [[podA, "pod-a"], [podB, "pod-b"]] as const) {
      assert((await p.agent.request({ op: "whoami", name, port: PORT })).ok);
    }
    assert((await t.nodeAgent.request({ op: "whoami", name: "node", port: 9100 })).ok);
    const inside = await t.addClient(); // 192.168.0.10: inside lb's source ranges
    const outside = await t.addClient(); // 192.168.0.11
    await Deno.writeTextFile(`${dir}/objects.yaml`, objects(podA.ip, podB.ip));
    const names = new Map([[`${podA.ip}:${PORT}`, "pod-a"], [`${podB.ip}:${PORT}`, "pod-b"], [
      "192.168.0.2:9100",
      "node",
    ]]);
    const flags = [
      `--source=file:${dir}/objects.yaml`,
      "--hostname-override=node-a",
      "--cluster-cidr=10.180.0.0/16",
      "--healthz-bind-address=127.0.0.1:10256",
      "--metrics-bind-address=127.0.0.1:10249",
    ];
    // The test's own connections, chosen without migrate: every kind of client, every address a
    // Service answers on, every node address a NodePort may answer on.
    const clusterIPs = ["172.30.2.1", "172.30.2.2", "172.30.2.3", "172.30.2.4", "172.30.2.5", "172.30.2.6"];
    const nodeAddresses = ["192.168.0.2", OTHER, "10.180.1.1", "10.180.2.1", "10.180.3.1"];
    const conns: Conn[] = [
      ...[...clusterIPs, "172.30.2.10", "172.30.2.11"].flatMap((dst) => [
        { who: "pod" as const, agent: podC.agent, src: podC.ip, dst, port: 80 },
        { who: "node" as const, agent: t.nodeAgent, src: "node", dst, port: 80 },
      ]),
      ...[30200, 30201, 30202, 30203].flatMap((port) => [
        ...nodeAddresses.map((dst) => ({
          who: "external" as const,
          agent: outside.agent,
          src: outside.ip,
          dst,
          port,
        })),
        { who: "loopback" as const, agent: t.nodeAgent, src: "node", dst: "127.0.0.1", port },
      ]),
      { who: "inside" as const, agent: inside.agent, src: inside.ip, dst: LB, port: 80 },
      { who: "outside" as const, agent: outside.agent, src: outside.ip, dst: LB, port: 80 },
    ];
    /** Migrate's row for `c`: the same destination and the same kind of client. */
    const rowFor = (rows: readonly Row[], c: Conn) =>
      rows.find((r) =>
        r.connection.dst === c.dst && r.connection.port === c.port &&
        (c.who === "pod"
          ? r.client.startsWith("a pod on this node")
          : c.who === "node"
          ? r.client === "this node"
          : c.who === "loopback"
          ? r.client.startsWith("this node on ")
          : c.who === "inside"
          ? r.client.includes("inside loadBalancerSourceRanges")
          : !r.client.startsWith("a pod") && !r.client.startsWith("this node") &&
            !r.client.includes(" inside "))
      );
    const start = async (mode: string) => {
      // migrate predicts where a switch ends: the ipvs mode's virtual servers are not kept draining
      // (the drain has its own test, tests/vm/guest/switch_ipvs.guest.ts).
      proxy = t.startProxy([`--proxy-mode=${mode}`, ...flags, "--migration-drain-timeout=0s", "--v=2"]);
      const p = proxy;
      await eventually(() => assert(/First sync in the kernel/.test(p.log()), p.log()), CONVERGE_MS);
      // Ready, and then the switch's end: the other modes' rules removed (a start takes over once
      // it serves everything; in the emulated guest that removal takes seconds after /readyz).
      await eventually(async () => {
        const r = await t.nodeAgent.http("127.0.0.1", 10256, ANSWER_MS, "/readyz");
        assert(r.startsWith("200 "), r);
      }, CONVERGE_MS);
      await eventually(
        () => assert(/Gave back what the start alone used/.test(p.log()), p.log()),
        CONVERGE_MS,
      );
      // ClientIP affinity in use before anything is asked.
      await podC.agent.tcp("172.30.2.5", 80);
    };
    /** Every connection, each bounded by what migrate says of it (`side` of its row). */
    const record = async (rows: readonly Row[], side: "before" | "after") => {
      const out: Seen[] = [];
      for (const c of conns) {
        const r = rowFor(rows, c);
        const kind = r === undefined ? "none" : said(r[side], names).kind;
        const firstMs = kind === "timeout" ? 1500 : kind === "none" || kind === "unknown" ? 2500 : ANSWER_MS;
        out.push(await see(c.agent, c.dst, c.port, firstMs));
      }
      return out;
    };
    await start(walk[0]);
    const wrong: string[] = [];
    const counts: string[] = [];
    for (let i = 0; i + 1 < walk.length; i++) {
      const [from, to] = [walk[i], walk[i + 1]];
      const m = await t.runProgram(["migrate", `--to=${to}`, ...flags.slice(0, 3), "--output=json"]);
      assert(m.code !== 2, m.stderr);
      const report = JSON.parse(m.stdout) as {
        connections: Row[];
        groups: Array<{ cause: string; services: string[] }>;
        nodeAddresses: { addresses: string[] };
      };
      // The node's own IPv4 addresses, never the service addresses the ipvs mode binds to kube-ipvs0.
      assertEquals(
        report.nodeAddresses.addresses.filter((a) => !a.includes(":")).sort(),
        [...nodeAddresses].sort(),
        `${from} -> ${to}: migrate's node addresses`,
      );
      // A pinned client may move once: each datapath keeps its own affinity entries.
      const reset = new Set(report.groups.find((g) => g.cause === "affinity-reset")?.services ?? []);
      const rows = report.connections;
      const before = await record(rows, "before");
      assertEquals((await proxy!.stop("SIGTERM")).code, 0);
      await start(to);
      const after = await record(rows, "after");
      let misses = 0;
      let falseChanges = 0;
      let compared = 0;
      for (const [i, c] of conns.entries()) {
        const [b, a] = [before[i], after[i]];
        const where = `${from} -> ${to}: ${c.who} -> ${c.dst}:${c.port}`;
        const r = rowFor(rows, c);
        if (r === undefined) {
          // A connection migrate did not compare is not "unchanged": it must touch no Service.
          if (b.kind === "answered" || a.kind === "answered") {
            wrong.push(`${where}: answered (${show(b)} -> ${show(a)}) but migrate did not compare it`);
          }
          continue;
        }
        compared++;
        const src = c.src;
        const [pb, pa] = [said(r.before, names), said(r.after, names)];
        if (!matches(pb, b, src)) wrong.push(`${where}: before, migrate said ${r.before}; seen ${show(b)}`);
        if (!matches(pa, a, src)) wrong.push(`${where}: after, migrate said ${r.after}; seen ${show(a)}`);
        // Whose address the endpoints saw: the client's, or (masqueraded, proxied) another.
        const sourceOf = (x: Seen) => [...new Set([...x.sources].map((y) => y === src))].join();
        // An endpoint answering after that could not answer before (random picks of the same set
        // are no change; a pinned client may move once where each datapath keeps its own entries).
        const couldBefore = pb.kind === "answered" ? new Set(pb.endpoints) : b.endpoints;
        const seenChanged = b.kind !== a.kind ||
          (b.kind === "answered" && src !== "node" && sourceOf(b) !== sourceOf(a)) ||
          (a.kind === "answered" && [...a.endpoints].some((e) => !couldBefore.has(e)) &&
            !reset.has(r.service));
        const saidKindChanged =
          pb.kind !== pa.kind && !(pb.kind === "none" && a.kind !== "answered" && b.kind !== "answered") ||
          (pb.kind === "answered" && pa.kind === "answered" && src !== "node" && pb.source !== pa.source);
        if (seenChanged && !r.changed) {
          misses++;
          wrong.push(
            `${where}: MISS: it changed (${show(b)} -> ${show(a)}), migrate said unchanged (${r.before})`,
          );
        }
        if (r.changed && saidKindChanged && !seenChanged) {
          falseChanges++;
          wrong.push(
            `${where}: FALSE CHANGE: migrate said ${r.before} -> ${r.after}; seen ${show(b)} both times`,
          );
        }
      }
      counts.push(
        `${from} -> ${to}: ${compared} real connections compared with migrate's ${rows.length}, ${
          rows.filter((r) => r.changed).length
        } changes predicted, ${misses} misses, ${falseChanges} false changes`,
      );
    }
    return { counts, wrong };
  } finally {
    await proxy?.stop("SIGKILL");
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function show(s: Seen): string {
  return s.kind === "answered" ? `${[...s.endpoints].join(",")} seeing ${[...s.sources].join(",")}` : s.kind;
}
