/**
 * `explain NAMESPACE/NAME --all-nodes` as an operator runs it (`deno task start`, the shipped
 * permission set) against the test API server, whose pod exec runs the program's real `explain`
 * (offline, over each node's own objects file) for the pods that answer: the aggregation, every
 * reason a node is not asked, the bounded concurrency, the exit codes, and the role in deploy/ as
 * exactly the requests made.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { type Access, TestApiServer } from "../support/api_server.ts";
import type { ExecPlan, ExecRequest } from "../support/exec_stream_server.ts";
import { runOnce, startArgs } from "../support/program.ts";
import {
  CLUSTER_CIDR,
  nodeObject,
  objectsFile,
  proxyPod,
  SERVICE,
  webService,
  webSlice,
  writeKubeconfig,
} from "../support/proxy_cluster.ts";
import { loadAllBounded } from "../../proxier/runtime/bounded_yaml.ts";
import type { ClusterReport } from "../../proxier/commands/explain/cluster/cluster_report.ts";

const TOKEN = "operator-secret-token-1f2e3d";
const NOW = Date.now();
const FRESH = ["10.180.1.2", "10.180.3.2"];
const STALE = ["10.180.1.2", "10.180.2.2"];

/** A cluster on the test API server; each answering node's exec runs the real offline explain over its file. */
class Cluster {
  readonly api = new TestApiServer();
  readonly dir = Deno.makeTempDirSync({ prefix: "kpd-cluster-" });
  readonly execs: ExecRequest[] = [];
  readonly #plans = new Map<string, (r: ExecRequest) => ExecPlan>();
  kubeconfig = "";

  constructor() {
    this.api.apply("services", webService());
    this.api.apply("endpointslices", webSlice(FRESH, NOW - 60_000));
    this.api.onExec = (r) => {
      this.execs.push(r);
      return this.#plans.get(r.pod)?.(r) ?? { fail: "no plan" };
    };
  }

  async start(): Promise<void> {
    this.kubeconfig = await writeKubeconfig(this.dir, this.api.start(), TOKEN);
  }

  /** Node `name` with a proxy pod that answers from a file of `endpoints` (the API's, or stale ones). */
  answering(name: string, endpoints = FRESH, triggerMs = NOW - 60_000): void {
    const file = `${this.dir}/${name}.yaml`;
    Deno.writeTextFileSync(
      file,
      objectsFile(nodeObject(name, "192.168.0.2"), webService(), webSlice(endpoints, triggerMs)),
    );
    this.node(name, (r) => ({
      run: {
        cmd: Deno.execPath(),
        args: startArgs([
          ...r.command.slice(1).filter((w) => !w.startsWith("--config=")),
          `--source=file:${file}`,
          `--hostname-override=${name}`,
          `--cluster-cidr=${CLUSTER_CIDR}`,
        ]),
      },
    }));
  }

  /** Node `name` with a proxy pod whose exec does what `plan` says (undefined: a pod not running). */
  node(name: string, plan?: (r: ExecRequest) => ExecPlan): void {
    this.api.apply("nodes", nodeObject(name, "192.168.0.2"));
    const pod = `kube-proxy-${name}`;
    this.api.apply(
      "pods",
      proxyPod(
        pod,
        name,
        `/var/lib/kube-proxy/${name}.conf`,
        plan === undefined ? { waiting: "ContainerCreating" } : {},
      ),
    );
    if (plan !== undefined) this.#plans.set(pod, plan);
  }

  run(...flags: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return runOnce(["explain", SERVICE, "--all-nodes", `--kubeconfig=${this.kubeconfig}`, ...flags]);
  }

  async close(): Promise<void> {
    await this.api.stop();
    await Deno.remove(this.dir, { recursive: true });
  }
}

async function withCluster(fn: (c: Cluster) => Promise<void>): Promise<void> {
  const c = new Cluster();
  try {
    await fn(c);
  } finally {
    await c.close();
  }
}

/** deploy/explain-rbac.yaml's grants as `verb resource scope` (scope: cluster, or the Role's namespace). */
function granted(): Set<string> {
  const docs = loadAllBounded(
    Deno.readTextFileSync(new URL("../../deploy/explain-rbac.yaml", import.meta.url)),
  ) as Array<
    {
      kind: string;
      metadata: { namespace?: string };
      rules?: Array<{ resources: string[]; verbs: string[] }>;
    }
  >;
  const out = new Set<string>();
  for (const d of docs.filter((d) => d.kind === "ClusterRole" || d.kind === "Role")) {
    const scope = d.kind === "Role" ? d.metadata.namespace! : "cluster";
    for (const r of d.rules ?? []) {
      for (const res of r.resources) for (const v of r.verbs) out.add(`${v} ${res} ${scope}`);
    }
  }
  return out;
}

/** The requests made, as the grants that allow them: pods in the proxies' namespace, the rest cluster-wide. */
function requested(access: readonly Access[]): Set<string> {
  return new Set(
    access.map((a) => `${a.verb} ${a.resource} ${a.resource.startsWith("pods") ? a.namespace : "cluster"}`),
  );
}

Deno.test("explain --all-nodes: a healthy cluster is exit 0, each node's mode, reach and agreement reported; the requests are exactly deploy/explain-rbac.yaml's role; the token is never printed", async () => {
  await withCluster(async (c) => {
    c.answering("node-a");
    c.answering("node-b");
    await c.start();
    const json = await c.run("--output=json");
    assertEquals(json.code, 0, json.stderr);
    const r = JSON.parse(json.stdout) as ClusterReport;
    assertEquals(r.nodes.map((n) => [n.node, n.verdict, n.mode]), [
      ["node-a", "agrees", "iptables"],
      ["node-b", "agrees", "iptables"],
    ]);
    assertEquals(r.counts, {
      nodes: 2,
      asked: 2,
      agree: 2,
      behind: 0,
      drifted: 0,
      claimed: 0,
      notChecked: 0,
      notAsked: 0,
    });
    const reach = r.nodes[0].reach.map((l) => `${l.client} -> ${l.reaches} (${l.by})`);
    assert(reach.length >= 3, reach.join("\n"));
    for (const line of reach) assertMatch(line, /-> 10\.180\.1\.2:8080, 10\.180\.3\.2:8080 \(kernel\)$/);
    assertEquals(r.api.ports.map((p) => p.endpoints.map((e) => e.endpoint)), [[
      "10.180.1.2:8080",
      "10.180.3.2:8080",
    ]]);
    // The in-pod command: the program, the Service, JSON, and the proxy's --config from the pod spec.
    // The nodes are asked at once: node-a's request is found by its pod, not by its place.
    const nodeA = c.execs.find((e) => e.pod === "kube-proxy-node-a");
    assertEquals(nodeA?.command, [
      "kube-proxy-deno",
      "explain",
      SERVICE,
      "--output=json",
      "--config=/var/lib/kube-proxy/node-a.conf",
    ]);
    assertEquals(nodeA?.container, "kube-proxy");

    const text = await c.run();
    assertEquals(text.code, 0, text.stderr);
    assertMatch(text.stdout, /^AGREES node-a \(pod kube-proxy-node-a, iptables, no sync yet\)$/m);
    assertMatch(text.stdout, /^2 nodes: 2 agree, 0 behind the API/m);
    for (const out of [json, text]) {
      assert(!(out.stdout + out.stderr).includes(TOKEN), "the token is never printed");
    }
    assertEquals(
      [...requested(c.api.access)].sort(),
      [...granted()].sort(),
      "the role is what is used, no more, no less",
    );
  });
});

Deno.test("explain --all-nodes: every node not asked is listed with why (no pod, not running, forbidden, timed out, upstream kube-proxy), and the exit is 3", async () => {
  await withCluster(async (c) => {
    c.answering("node-a");
    c.node("node-b", () => ({ print: { stdout: "", code: 0 } }));
    c.api.forbid = (a) => a.resource === "pods/exec" && a.name === "kube-proxy-node-b";
    c.node("node-c");
    c.api.apply("nodes", nodeObject("node-d", "192.168.0.5"));
    let active = 0;
    let most = 0;
    for (const n of ["node-e", "node-f", "node-g"]) {
      c.node(n, () => {
        active++;
        // Read a moment later: the server notices a stream the client closed only after it was
        // closed, and on a busy machine that lag alone looks like a third stream at once. A third
        // the client really opened would hang there until its node timeout (1 s).
        setTimeout(() => most = Math.max(most, active), 300);
        return { hang: true, gone: () => active-- };
      });
    }
    c.node(
      "node-h",
      (r) =>
        r.command[0] === "kube-proxy" ? { print: { stdout: "Kubernetes v1.36.2\n", code: 0 } } : {
          fail: `failed to exec in container: exec: "${
            r.command[0]
          }": executable file not found in $PATH: unknown`,
        },
    );
    await c.start();
    const out = await c.run("--output=json", "--node-timeout=1s", "--concurrency=2");
    assertEquals(out.code, 3, out.stderr);
    const r = JSON.parse(out.stdout) as ClusterReport;
    assertEquals(r.nodes.map((n) => [n.node, n.verdict]), [["node-a", "agrees"]]);
    assertEquals(r.notAsked.map((n) => [n.node, n.reason]), [
      ["node-b", "forbidden"],
      ["node-c", "not-ready"],
      ["node-d", "no-pod"],
      ["node-e", "timed-out"],
      ["node-f", "timed-out"],
      ["node-g", "timed-out"],
      ["node-h", "upstream"],
    ]);
    assertMatch(r.notAsked[0].detail, /cannot get resource "pods\/exec"/);
    assertMatch(r.notAsked[1].detail, /ContainerCreating/);
    assertMatch(r.notAsked[6].detail, /upstream kube-proxy \(Kubernetes v1\.36\.2\)/);
    assert(most <= 2, `at most --concurrency nodes are asked at once (saw ${most})`);
    assertEquals(r.counts.notAsked, 7);
  });
});

Deno.test("explain --all-nodes: a node whose proxy holds endpoints the API replaced is BEHIND, named first with what differs and how long; exit 1", async () => {
  await withCluster(async (c) => {
    c.answering("node-a");
    c.answering("node-b", STALE, NOW - 3_600_000);
    await c.start();
    const out = await c.run("--output=json");
    assertEquals(out.code, 1, out.stderr);
    const r = JSON.parse(out.stdout) as ClusterReport;
    assertEquals(r.nodes.map((n) => [n.node, n.verdict]), [["node-b", "behind"], ["node-a", "agrees"]]);
    assertEquals(r.nodes[0].api.differences, [
      "http 80/TCP IPv4: lacks endpoint 10.180.3.2:8080 (ready)",
      "http 80/TCP IPv4: holds endpoint 10.180.2.2:8080 (ready) the API removed",
    ]);
    const behind = r.nodes[0].api.behindSeconds!;
    assert(behind >= 60 && behind < 600, `behind since the API's change a minute ago: ${behind}`);
    const text = await c.run();
    assertEquals(text.code, 1);
    const first = text.stdout.split("\n").findIndex((l) => /^(BEHIND|DRIFTED|AGREES|NOT)/.test(l));
    assertMatch(text.stdout.split("\n")[first], /^BEHIND node-b /);
    assertMatch(text.stdout, /behind the API for at least \d+s: the API's newest change is of /);
  });
});

Deno.test("explain --all-nodes: bad input is exit 2 naming it; a Service the API lacks and a refused list are exit 1 naming the role", async () => {
  await withCluster(async (c) => {
    c.answering("node-a");
    await c.start();
    for (
      const [flags, said] of [
        [["--concurrency=0"], /--concurrency/],
        [["--node-timeout=soon"], /--node-timeout/],
        [["--node-ip=192.168.0.2"], /not with --node-ip/],
        [["--proxy-namespace=Kube_System"], /--proxy-namespace/],
      ] as const
    ) {
      const out = await c.run(...flags);
      assertEquals(out.code, 2, `${flags}: ${out.stderr}`);
      assertMatch(out.stderr, said);
    }
    const stray = await runOnce(["explain", SERVICE, "--proxy-selector=app=x"]);
    assertEquals(stray.code, 2);
    assertMatch(stray.stderr, /--proxy-selector is read only with --all-nodes/);
    const noConfig = await runOnce(["explain", SERVICE, "--all-nodes", `--kubeconfig=${c.dir}/absent`]);
    assertEquals(noConfig.code, 2);
    assertMatch(noConfig.stderr, /absent/);

    const missing = await runOnce(["explain", "e2e/nope", "--all-nodes", `--kubeconfig=${c.kubeconfig}`]);
    assertEquals(missing.code, 1);
    assertMatch(missing.stderr, /the API has no Service e2e\/nope/);
    c.api.forbid = (a) => a.resource === "pods" && a.verb === "list";
    const refused = await c.run();
    assertEquals(refused.code, 1);
    assertMatch(refused.stderr, /refuses to list pods in kube-system .*403.*deploy\/explain-rbac\.yaml/);
    assert(!(refused.stdout + refused.stderr).includes(TOKEN));
  });
});
