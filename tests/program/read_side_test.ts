/**
 * `explain`, `trace` and `render` on ordinary input, as a new user tries them: an objects file with
 * its Node, ClusterIP, NodePort and LoadBalancer Services with externalTrafficPolicy Local, ready,
 * not-ready and terminating endpoints on two nodes, one Service with a Maglev annotation. Each test
 * holds one promise: a broken file fails naming its line, the file's Node is the node acted for,
 * nothing is called agreement that was not checked, synthetic clients collide with nothing, help
 * and errors say what the user needs.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { runOnce } from "../support/program.ts";

const run = runOnce;

const NODE_A = `apiVersion: v1
kind: Node
metadata: { name: node-a, labels: { topology.kubernetes.io/zone: z1 } }
spec: { podCIDR: 10.244.1.0/24, podCIDRs: [10.244.1.0/24] }
status: { addresses: [{ type: InternalIP, address: 192.168.1.5 }] }
`;

/** The user's cluster as seen from node-a; `lbIP` is the LoadBalancer Service's address. */
function objects(lbIP = "192.0.2.80"): string {
  return `${NODE_A}---
apiVersion: v1
kind: Service
metadata: { namespace: shop, name: web }
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.80
  clusterIPs: [172.30.0.80]
  externalTrafficPolicy: Local
  healthCheckNodePort: 30900
  loadBalancerSourceRanges: [198.51.100.0/24, 203.0.113.0/25]
  ports: [{ name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30800 }]
status: { loadBalancer: { ingress: [{ ip: ${lbIP} }] } }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: shop, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: http, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [10.244.1.5], conditions: { ready: true }, nodeName: node-a }
  - { addresses: [10.244.2.5], conditions: { ready: true }, nodeName: node-b }
  - { addresses: [10.244.2.6], conditions: { ready: false }, nodeName: node-b }
  - { addresses: [10.244.1.7], conditions: { ready: false, serving: true, terminating: true }, nodeName: node-a }
---
apiVersion: v1
kind: Service
metadata: { namespace: shop, name: api }
spec:
  type: NodePort
  clusterIP: 172.30.0.81
  clusterIPs: [172.30.0.81]
  ports: [{ name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30801 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: shop, name: api-1, labels: { kubernetes.io/service-name: api } }
addressType: IPv4
ports: [{ name: http, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [10.244.1.8], conditions: { ready: true }, nodeName: node-a }
  - { addresses: [10.244.2.8], conditions: { ready: true }, nodeName: node-b }
---
apiVersion: v1
kind: Service
metadata:
  namespace: default
  name: cache
  annotations: { kube-router.io/service.scheduler: mh }
spec:
  clusterIP: 172.30.0.82
  clusterIPs: [172.30.0.82]
  ports: [{ name: redis, protocol: TCP, port: 6379 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: default, name: cache-1, labels: { kubernetes.io/service-name: cache } }
addressType: IPv4
ports: [{ name: redis, protocol: TCP, port: 6379 }]
endpoints:
  - { addresses: [10.244.1.9], conditions: { ready: true }, nodeName: node-a }
`;
}

/** Writes `text` as objects.yaml in a fresh directory; runs `fn` with its path, then removes it. */
async function withObjects(text: string, fn: (file: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kpd-read-side-" });
  try {
    await Deno.writeTextFile(`${dir}/objects.yaml`, text);
    await fn(`${dir}/objects.yaml`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("read side: a file that does not parse is exit 1 naming the file and line, for render, explain and trace", async () => {
  const broken = objects().replace("  clusterIP: 172.30.0.81\n", "  clusterIP: 172.30.0.81\n bad: [\n");
  await withObjects(broken, async (file) => {
    const line = broken.split("\n").findIndex((l) => l === " bad: [") + 1;
    for (
      const [cmd, args] of [
        ["render", ["render"]],
        ["explain", ["explain", "shop/web"]],
        ["trace", ["trace", "--dst=172.30.0.80", "--dport=80"]],
      ] as const
    ) {
      const r = await run([...args, `--source=file:${file}`]);
      assertEquals(r.code, 1, `${cmd}: ${r.stderr}${r.stdout}`);
      assertEquals(r.stdout, "", `${cmd} prints no rules or report`);
      assertMatch(
        r.stderr,
        new RegExp(`^kube-proxy-deno: ${cmd}: --source: ${file}:(${line}|${line + 1}): \\S`),
      );
    }
  });
});

Deno.test("read side: the offline commands act for the file's one Node; two Nodes or none is exit 2 naming --hostname-override", async () => {
  await withObjects(objects(), async (file) => {
    const r = await run([
      "explain",
      "shop/web",
      `--source=file:${file}`,
      "--cluster-cidr=10.244.0.0/16",
      "--output=json",
    ]);
    assertEquals(r.code, 0, r.stderr + r.stdout);
    const report = JSON.parse(r.stdout);
    assertEquals(report.node, "node-a");
    const port = report.ports[0];
    assertEquals(
      port.endpoints.map((e: { endpoint: string; local: boolean }) => `${e.endpoint} ${e.local}`),
      ["10.244.1.5:8080 true", "10.244.1.7:8080 true", "10.244.2.5:8080 false", "10.244.2.6:8080 false"],
    );
    // The pod, the node and the external clients are all asked about, with the Node's address.
    const clients = port.clients.map((c: { client: string; via: string }) => `${c.client} ${c.via}`);
    for (const c of ["pod cluster IP", "node cluster IP", "external NodePort", "external load balancer IP"]) {
      assert(clients.includes(c), `${c} in ${clients}`);
    }
    assertEquals(port.skipped, []);
    assertEquals(
      port.clients.find((c: { client: string }) => c.client === "node").connection.src,
      "192.168.1.5",
    );
    // The pod client's address is in the Node's pod CIDR, not merely the cluster's.
    assertMatch(
      port.clients.find((c: { client: string }) => c.client === "pod").connection.src,
      /^10\.244\.1\./,
    );
  });
  const nodeB = NODE_A.replaceAll("node-a", "node-b").replace("192.168.1.5", "192.168.1.6");
  await withObjects(`${objects()}---\n${nodeB}`, async (file) => {
    const r = await run(["render", `--source=file:${file}`]);
    assertEquals(r.code, 2, r.stderr);
    assertEquals(r.stdout, "");
    assertMatch(r.stderr, /--hostname-override: the source defines 2 Nodes \(node-a, node-b\)/);
    const named = await run(["render", `--source=file:${file}`, "--hostname-override=node-b"]);
    assertEquals(named.code, 0, named.stderr);
    assertMatch(named.stderr, /addresses="192\.168\.1\.6 \(the Node object \\"node-b\\"'s/);
  });
  await withObjects(objects().slice(objects().indexOf("---\n") + 4), async (file) => {
    const r = await run(["explain", "shop/web", `--source=file:${file}`]);
    assertEquals(r.code, 2, r.stderr);
    assertMatch(r.stderr, /--hostname-override: the source defines no Node/);
  });
});

Deno.test("read side: a client explain cannot ask about is named with why and the flag that adds it, never counted as agreement", async () => {
  await withObjects(objects(), async (file) => {
    // No --cluster-cidr: pods cannot be told apart.
    const r = await run(["explain", "shop/api", `--source=file:${file}`, "--output=json"]);
    // Nothing disagrees, but not everything was checked: exit 3, not 0.
    assertEquals(r.code, 3, r.stderr + r.stdout);
    const report = JSON.parse(r.stdout);
    const port = report.ports[0];
    assertEquals(report.notChecked, 1);
    assertEquals(port.skipped.map((s: { client: string }) => s.client), ["pod"]);
    assertMatch(port.skipped[0].why, /--cluster-cidr/);
    const text = await run(["explain", "shop/api", `--source=file:${file}`]);
    assertEquals(text.code, 3);
    // Said first, before any client.
    assertMatch(
      text.stdout,
      /^Service shop\/api: [^]*?\nNOT CHECKED: 1 client was not checked \(each said below[^]*?\nport http/,
    );
    assertMatch(
      text.stdout,
      /\n {2}a pod on this node \(cluster IP\): not asked about here: pods cannot be told/,
    );
    assertMatch(
      text.stdout,
      /\nThe datapath agrees with the model for the 3 clients checked\. 1 client was not\s+checked/,
    );
    assert(!text.stdout.includes("every client checked"), text.stdout);
  });
});

Deno.test("read side: synthetic clients collide with no address of the Service, and --client-ip asks about a real one", async () => {
  // The load balancer takes the address a fixed synthetic client would have used.
  await withObjects(objects("203.0.113.10"), async (file) => {
    for (const mode of ["iptables", "nftables", "ipvs"]) {
      const r = await run([
        "explain",
        "shop/web",
        `--source=file:${file}`,
        `--proxy-mode=${mode}`,
        "--cluster-cidr=10.244.0.0/16",
        "--output=json",
      ]);
      assertEquals(r.code, 0, `${mode}: ${r.stderr}${r.stdout}`);
      const report = JSON.parse(r.stdout);
      assertEquals(report.disagreements, 0, mode);
      const port = report.ports[0];
      const srcs = port.clients.map((c: { connection: { src: string } }) => c.connection.src);
      assert(!srcs.includes("203.0.113.10"), `${mode}: ${srcs}`);
      const label = (l: string) =>
        port.clients.find((c: { label: string }) => c.label === l)?.connection.src as string | undefined;
      // Inside one source range and outside both (203.0.113.0/25 is a range: outside it means .128+).
      assertMatch(label("an external client inside loadBalancerSourceRanges") ?? "", /^198\.51\.100\./);
      const outside = label("an external client outside loadBalancerSourceRanges") ?? "";
      assert(
        outside !== "" && !outside.startsWith("198.51.100.") &&
          !/^203\.0\.113\.([0-9]|[0-9][0-9]|1[01][0-9]|12[0-7])$/.test(outside),
        outside,
      );
    }
    const real = await run([
      "explain",
      "shop/web",
      `--source=file:${file}`,
      "--cluster-cidr=10.244.0.0/16",
      "--client-ip=198.51.100.77",
      "--output=json",
    ]);
    assertEquals(real.code, 0, real.stderr + real.stdout);
    const clients = JSON.parse(real.stdout).ports[0].clients.filter((c: { client: string }) =>
      c.client === "external"
    );
    assert(clients.length >= 2, JSON.stringify(clients));
    for (const c of clients) assertEquals(c.connection.src, "198.51.100.77");
    assert(
      clients.some((c: { label: string }) =>
        c.label === "the client 198.51.100.77 inside loadBalancerSourceRanges"
      ),
    );
  });
});

Deno.test("read side: a port the Service does not have is named with the ports it has; explain's help is its own", async () => {
  await withObjects(objects(), async (file) => {
    const r = await run(["explain", "shop/web", "--port=1234", `--source=file:${file}`]);
    assertEquals(r.code, 2, "a port the Service lacks is bad input");
    assertEquals(
      r.stderr.trim().split("\n").at(-1),
      'kube-proxy-deno: explain: Service shop/web has no port "1234"; its ports: http 80/TCP',
    );
    const gone = await run(["explain", "shop/nope", `--source=file:${file}`]);
    assertEquals(gone.code, 1);
    assertMatch(gone.stderr, /explain: no Service shop\/nope with a proxied port here/);
  });
  const help = await run(["explain", "--help"]);
  assertEquals(help.code, 0);
  assertMatch(help.stdout, /^Usage: kube-proxy-deno explain NAMESPACE\/NAME \[flags\]\n/);
  assertMatch(help.stdout, /\n {2}--client-ip IP +ask about this client's connections/);
  // Nothing running to ask: the flag to point at it and the offline form are named.
  const none = await run(["explain", "shop/web", "--metrics-bind-address=127.0.0.1:1"]);
  assertEquals(none.code, 1);
  assertMatch(none.stderr, /--metrics-bind-address \(here 127\.0\.0\.1:1\).*--source=file:PATH/s);
});

Deno.test("read side: trace --source=file: traces the objects' rendered rules, never this host's live ones", async () => {
  await withObjects(objects(), async (file) => {
    const r = await run([
      "trace",
      `--source=file:${file}`,
      "--proxy-mode=nftables",
      "--cluster-cidr=10.244.0.0/16",
      "--dst=172.30.0.81",
      "--dport=80",
      "--src=10.244.1.20",
      "--from=pod",
    ]);
    assertEquals(r.code, 0, r.stderr);
    assertMatch(r.stdout, new RegExp(`\\nrules: nftables mode, rendered for node node-a from ${file}\\n`));
    assertMatch(r.stdout, /\nnode addresses: the rendered node's: 192\.168\.1\.5 /);
    assertMatch(r.stdout, /\n {2}10\.244\.1\.8:8080 +50\.0%\n {2}10\.244\.2\.8:8080 +50\.0%\n/);
    assertMatch(r.stdout, /\nverdict: DNAT\n$/);
  });
});

Deno.test("read side: masquerade reasons read the right way round", async () => {
  await withObjects(objects(), async (file) => {
    const r = await run([
      "explain",
      "shop/api",
      `--source=file:${file}`,
      "--cluster-cidr=10.244.0.0/16",
      "--output=json",
    ]);
    assertEquals(r.code, 0, r.stderr);
    const clients = JSON.parse(r.stdout).ports[0].clients;
    const why = (kind: string) =>
      clients.find((c: { client: string }) => c.client === kind).expected.masqueradeWhy;
    assertEquals(why("pod"), "from this node's pods (source in 10.244.0.0/16): the source is kept");
    assertEquals(why("node"), "not from this node's pods (source outside 10.244.0.0/16): masqueraded");
  });
});

Deno.test("read side: explain warns only about the Service it was asked about; render, which renders them all, about each", async () => {
  await withObjects(objects(), async (file) => {
    const src = `--source=file:${file}`;
    const web = await run(["explain", "shop/web", src, "--proxy-mode=iptables"]);
    assert(!web.stderr.includes("default/cache"), web.stderr);
    const cache = await run(["explain", "default/cache", src, "--proxy-mode=iptables"]);
    assertMatch(cache.stderr, /default\/cache.*mh.* is not honoured in iptables mode/);
    const render = await run(["render", src, "--proxy-mode=iptables"]);
    assertEquals(render.code, 0, render.stderr);
    assertMatch(render.stderr, /default\/cache.*mh.* is not honoured in iptables mode/);
  });
});

/** A Service `ns/name` on port 80 with its one endpoint, `spec` lines added. */
const svcWith = (ns: string, name: string, clusterIP: string, ep: string, spec = "") =>
  `---
apiVersion: v1
kind: Service
metadata: { namespace: ${ns}, name: ${name} }
spec:
  clusterIP: ${clusterIP}
  clusterIPs: [${clusterIP}]
${spec}  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: ${ns}, name: ${name}-1, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints: [{ addresses: [${ep}], conditions: { ready: true }, nodeName: node-a }]
`;

Deno.test("read side: a Service that takes another's address is named by render and explain in every mode; the loser's clients are never 'agrees'", async () => {
  // CVE-2020-8554's shape: evil/mitm's external IP is shop/web's cluster IP (API-valid).
  const text = NODE_A + svcWith("shop", "web", "172.30.0.80", "10.244.1.5") +
    svcWith("evil", "mitm", "172.30.0.99", "10.244.1.66", "  externalIPs: [172.30.0.80]\n");
  await withObjects(text, async (file) => {
    for (const mode of ["iptables", "nftables", "userspace"]) {
      const src = [`--source=file:${file}`, `--proxy-mode=${mode}`, "--cluster-cidr=10.244.0.0/16"];
      const flat = (x: { stdout: string; stderr: string; code: number }) => ({
        ...x,
        stdout: x.stdout.replace(/\s+/g, " "),
      });
      const loser = flat(await run(["explain", "shop/web", ...src]));
      assertEquals(loser.code, 1, `${mode}: ${loser.stdout}${loser.stderr}`);
      assertMatch(loser.stdout, /CLAIMED: evil\/mitm claims this address and port too and wins it/);
      assert(!/DISAGREEMENT/.test(loser.stdout), `${mode}: named as a claim, not blamed on drift`);
      assertMatch(
        loser.stdout,
        /ADDRESS CLAIM: 172\.30\.0\.80:80\/TCP is claimed by 2 Services: evil\/mitm \(its external IP\) wins/,
      );
      const json = JSON.parse((await run(["explain", "shop/web", ...src, "--output=json"])).stdout);
      const toWeb = json.ports[0].clients.filter((c: { connection: { dst: string } }) =>
        c.connection.dst === "172.30.0.80"
      );
      assert(
        toWeb.length > 0 && toWeb.every((c: { claimedBy?: string }) => c.claimedBy !== undefined),
        JSON.stringify(toWeb),
      );
      assertEquals(json.claimed, toWeb.length);
      // The winner's explain names the claim, and its own clients agree.
      const winner = flat(await run(["explain", "evil/mitm", ...src]));
      assertEquals(winner.code, 0, winner.stdout);
      assertMatch(winner.stdout, /ADDRESS CLAIM: 172\.30\.0\.80:80\/TCP/);
      const rendered = await run(["render", ...src]);
      assertMatch(
        rendered.stderr,
        /"Services claim the same address and port; one wins".*evil\/mitm \(its external IP\) wins/,
      );
    }
  });
  // Two Services with one cluster IP and NodePort (possible only in a file): b/two loses to a/one.
  const twins = NODE_A +
    svcWith("a", "one", "172.30.0.50", "10.244.1.11", "  type: NodePort\n").replace(
      "port: 80, targetPort: 8080 }",
      "port: 80, targetPort: 8080, nodePort: 30500 }",
    ) +
    svcWith("b", "two", "172.30.0.50", "10.244.1.22", "  type: NodePort\n").replace(
      "port: 80, targetPort: 8080 }",
      "port: 80, targetPort: 8080, nodePort: 30500 }",
    );
  await withObjects(twins, async (file) => {
    const r = await run([
      "explain",
      "b/two",
      `--source=file:${file}`,
      "--cluster-cidr=10.244.0.0/16",
      "--output=json",
    ]);
    assertEquals(r.code, 1, r.stderr);
    const clients = JSON.parse(r.stdout).ports[0].clients as Array<
      { claimedBy?: string; agrees: boolean | null; expected: { endpoints: string[] } }
    >;
    for (const c of clients) {
      assert(c.claimedBy !== undefined, `every client of b/two reaches a/one: ${JSON.stringify(c)}`);
      assert(!c.expected.endpoints.includes("10.244.1.22:8080"));
    }
  });
});
