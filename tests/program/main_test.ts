/**
 * The program entry point as operators run it: exit codes, messages, `render`.
 */
import { CONVERGE_MS } from "../support/bounds.ts";
import { FakeIPTables } from "../../iptables/testing/fake_iptables.ts";
import { FakeNft } from "../../iptables/testing/fake_nft.ts";
import { FakeIpset } from "../../iptables/testing/fake_ipset.ts";
import { FakeIpvsadm } from "../../iptables/testing/fake_ipvsadm.ts";
import { hostStartArgs, ProxyProcess } from "../support/program.ts";
import { commandWorks, netnsAvailable, withNamespace } from "../support/namespace.ts";
import { TestApiServer } from "../support/api_server.ts";
import { makeService } from "../support/fixtures.ts";
import { eventually, freePort } from "../support/net_helpers.ts";
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { maglevTable } from "../../loadbalancer/maglev.ts";
import { nftJhash, portBytes } from "../../loadbalancer/jhash.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

async function run(
  args: string[],
  env?: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: hostStartArgs(args),
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/**
 * Starts the program in userspace mode without portals on the host, as `deno task start` does
 * (the host-safe flags added), with `args`; its stderr is collected.
 */
function startUserspace(args: string[]): ProxyProcess {
  const child = new Deno.Command(Deno.execPath(), {
    args: hostStartArgs(["--proxy-mode=userspace", "--userspace-portals=false", ...args]),
    stdout: "null",
    stderr: "piped",
  }).spawn();
  return new ProxyProcess(child);
}

Deno.test("main: bad flags exit 2 naming the flag; --version and --help exit 0", async () => {
  const bad = await run(["--iptables-sync-period=often"]);
  assertEquals(bad.code, 2);
  assertMatch(bad.stderr, /kube-proxy-deno: --iptables-sync-period: invalid duration "often"/);
  // This machine's kernel has no IPVS: one line says what is missing and what to use instead.
  const ipvs = await run(["--proxy-mode=ipvs", `--source=file:${ROOT}demo/objects.yaml`]);
  assertEquals(ipvs.code, 1, ipvs.stderr);
  assertMatch(ipvs.stderr, /ipvs mode cannot run: no IPVS in the kernel .*; try --proxy-mode=iptables/);
  assertEquals((await run(["--version"])).stdout, "kube-proxy-deno 0.1.0\n");
  const help = await run(["--help"]);
  assert(help.code === 0 && help.stdout.includes("--proxy-mode"));
});

Deno.test("main: render prints the restore input the real proxier builds, and iptables accepts it", async () => {
  const r = await run([
    "render",
    `--source=file:${ROOT}demo/objects.yaml`,
    "--hostname-override=demo-node",
    "--cluster-cidr=10.180.0.0/16",
  ]);
  assertEquals(r.code, 0, r.stderr);
  assert(r.stdout.startsWith("# iptables-restore --noflush input\n*mangle\n"), r.stdout.slice(0, 80));
  assert(
    r.stdout.includes('\n-I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES\n'),
  );
  assert(!r.stdout.includes("ip6tables"), "no IPv6 services, no IPv6 rule set");
  assertMatch(
    r.stdout,
    /-A KUBE-NODEPORTS -p tcp -m comment --comment "default\/hello:http" -m tcp --dport 30080 -j KUBE-EXT-/,
  );
  // What it prints is loadable as is.
  const fake = new FakeIPTables();
  await fake.restoreAll(r.stdout, { flush: false, counters: false });
  assertEquals(fake.rules("nat", "KUBE-MARK-MASQ"), ["-j MARK --or-mark 0x4000"]);
});

Deno.test("main: --logging-format=json writes one JSON object per line; --bind-address-hard-fail exits when a server cannot bind", async () => {
  const r = await run([
    "--proxy-mode=userspace",
    // Runs on the host: never program portal rules here.
    "--userspace-portals=false",
    `--source=file:${ROOT}demo/objects.yaml`,
    "--logging-format=json",
    "--healthz-bind-address=",
    // Not an address of this host: the metrics server cannot listen, and the program says so.
    "--metrics-bind-address=192.0.2.1:10249",
    "--bind-address-hard-fail",
  ]);
  assertEquals(r.code, 1);
  const records = r.stderr.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  assert(
    records.some((x) => String(x.msg).startsWith("Metrics server cannot listen on 192.0.2.1:10249")),
    JSON.stringify(r.stderr),
  );
  // component-base's JSON shape: ts (ms), caller (file:line), msg; v on info records, none on errors.
  for (const x of records) {
    assert(typeof x.ts === "number" && Math.abs(x.ts - Date.now()) < 60_000, JSON.stringify(x));
    assertMatch(String(x.caller), /^[\w.-]+\.ts:\d+$/);
    assert(typeof x.msg === "string", JSON.stringify(x));
  }
  const error = records.find((x) => String(x.msg).startsWith("Metrics server cannot listen"))!;
  assertEquals("v" in error, false);
  assert(records.some((x) => x.v === 0), r.stderr);
});

Deno.test("main: without --bind-address-hard-fail a server that cannot bind is retried every 5 s while the proxy serves", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const metricsPort = (taken.addr as Deno.NetAddr).port;
  const healthzPort = freePort();
  const proc = startUserspace([
    `--source=file:${ROOT}demo/objects.yaml`,
    "--hostname-override=demo-node",
    `--healthz-bind-address=127.0.0.1:${healthzPort}`,
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
  ]);
  try {
    await eventually(() => assertMatch(proc.log(), /"Metrics server failed" .*retryInMs=5000/), 10_000);
    // The proxy is up meanwhile: its health server answers.
    await eventually(async () => {
      const res = await fetch(`http://127.0.0.1:${healthzPort}/livez`);
      await res.body?.cancel();
      assertEquals(res.status, 200);
    }, CONVERGE_MS);
    taken.close();
    await eventually(async () => {
      const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      assertMatch(await res.text(), /kubeproxy_sync_proxy_rules_last_timestamp_seconds/);
    }, CONVERGE_MS);
    assertMatch(proc.log(), /"Metrics server listening" address="127.0.0.1:\d+"/);
  } finally {
    try {
      taken.close();
    } catch { /* closed */ }
    await proc.stop();
  }
});

Deno.test("main: --master=http://... is reached with the shipped permissions; a kubeconfig that cannot work exits 1", async () => {
  const api = new TestApiServer();
  api.apply("services", makeService("ns1", "svc1", (s) => s.spec!.type = "ClusterIP"));
  const url = api.start();
  const metricsPort = freePort();
  const dir = await Deno.makeTempDir({ prefix: "kpd-kubeconfig-" });
  try {
    const proc = startUserspace([
      "--bind-address=127.0.0.1",
      "--hostname-override=node-a",
      `--master=${url}`,
      "--healthz-bind-address=",
      `--metrics-bind-address=127.0.0.1:${metricsPort}`,
      "--feature-gates=AllowServiceExternalIPs=false,NFTablesNetlink=false",
    ]);
    await eventually(
      () => assertMatch(proc.log(), /"Initial list complete" kind="Service" objects=1/),
      20_000,
    );
    assertMatch(proc.log(), new RegExp(`"Using the API server" server="${url}" from="--master"`));
    // client-go's request metrics and the build info, as the kube-proxy dashboards read them.
    const m = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const host = new URL(url).host;
    const lists = Number(
      new RegExp(`rest_client_requests_total\\{code="200",host="${host}",method="GET"\\} (\\d+)`).exec(m)
        ?.[1],
    );
    assert(lists >= 3, m);
    assertMatch(
      m,
      new RegExp(`rest_client_request_duration_seconds_count\\{host="${host}",verb="GET"\\} \\d+`),
    );
    assertMatch(
      m,
      /kubernetes_build_info\{.*compiler="deno".*git_version="v\d+\.\d+\.\d+-kube-proxy-deno".*\} 1/,
    );
    // Every gate upstream knows, with its stage ("" for GA) and whether it is on, as upstream's.
    for (
      const line of [
        'kubernetes_feature_enabled{name="AllowServiceExternalIPs",stage=""} 0',
        'kubernetes_feature_enabled{name="NFTablesNetlink",stage="BETA"} 0',
        'kubernetes_feature_enabled{name="KubeProxyIPVS",stage="DEPRECATED"} 1',
        'kubernetes_feature_enabled{name="KubeProxyNFTablesLocalhostNodePorts",stage="ALPHA"} 0',
        'kubernetes_feature_enabled{name="NFTablesProxyMode",stage=""} 1',
      ]
    ) assert(m.includes(`\n${line}\n`), line);
    assertEquals((await proc.stop()).code, 0);
    await Deno.writeTextFile(
      `${dir}/kubeconfig`,
      "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n" +
        "clusters: [{name: c, cluster: {server: 'https://10.0.0.1'}}]\nusers: [{name: u, user: {exec: {command: aws}}}]\n",
    );
    const bad = await run([
      "--proxy-mode=userspace",
      "--userspace-portals=false",
      `--kubeconfig=${dir}/kubeconfig`,
      "--healthz-bind-address=",
      "--metrics-bind-address=",
    ]);
    assertEquals(bad.code, 1);
    assertMatch(
      bad.stderr,
      /"Cannot reach the API server as configured" .*kubeconfig: users.*exec is not supported/,
    );
  } finally {
    await api.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: render --proxy-mode=nftables prints the transaction a full sync applies, and nft accepts it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kpd-render-" });
  try {
    // A Node object gives the NodePort address, so the output does not depend on this machine.
    await Deno.writeTextFile(
      `${dir}/node.yaml`,
      "apiVersion: v1\nkind: Node\nmetadata: { name: node-a }\nstatus: { addresses: [{ type: InternalIP, address: 192.168.0.2 }] }\n",
    );
    await Deno.copyFile(`${ROOT}demo/objects.yaml`, `${dir}/objects.yaml`);
    const r = await run([
      "render",
      "--proxy-mode=nftables",
      `--source=file:${dir}`,
      "--hostname-override=node-a",
    ]);
    assertEquals(r.code, 0, r.stderr);
    assert(
      r.stdout.startsWith(
        `# nft -f - input (ip)\nadd table ip kube-proxy { comment "rules for kube-proxy" ; }\n`,
      ),
      r.stdout.slice(0, 80),
    );
    assert(!r.stdout.includes("(ip6)"), "no IPv6 services, no IPv6 transaction");
    assertMatch(r.stdout, /192\.168\.0\.2 \. tcp \. 30080 : goto external/);
    const fake = new FakeNft();
    await fake.apply(r.stdout);
    assert(
      fake.listChains("IPv4", "kube-proxy")!.includes("services"),
      String(fake.listChains("IPv4", "kube-proxy")),
    );
    // trace tells the mode from the file and walks the rendered transaction.
    await Deno.writeTextFile(`${dir}/rules.nft`, r.stdout);
    const traced = await run([
      "trace",
      `--rules=${dir}/rules.nft`,
      "--src=10.180.1.5",
      "--dst=172.30.0.10",
      "--dport=80",
      "--output=json",
    ]);
    assertEquals(traced.code, 0, traced.stderr);
    const report = JSON.parse(traced.stdout);
    assertEquals({ mode: report.mode, verdict: report.verdict, endpoints: report.endpoints }, {
      mode: "nftables",
      verdict: "DNAT",
      endpoints: [
        { endpoint: "127.0.0.1:18081", probability: 0.5 },
        { endpoint: "127.0.0.1:18082", probability: 0.5 },
      ],
    });
    const chains = report.path.map((s: { chain: string }) => s.chain);
    assertEquals(chains.filter((c: string) => ["nat-prerouting", "services", "internal"].includes(c)), [
      "nat-prerouting",
      "services",
      "internal",
    ]);
    // Its own listing reads back the same.
    await Deno.writeTextFile(`${dir}/listing.nft`, fake.listTable("IPv4", "kube-proxy"));
    const fromListing = await run([
      "trace",
      `--rules=${dir}/listing.nft`,
      "--src=10.180.1.5",
      "--dst=172.30.0.10",
      "--dport=80",
      "--output=json",
    ]);
    assertEquals(JSON.parse(fromListing.stdout).endpoints, report.endpoints, fromListing.stderr);
    if (await netnsAvailable() && await commandWorks("nft")) {
      await withNamespace(async (exec) => {
        const loaded = await exec.run("nft", { args: ["-f", "-"], stdin: r.stdout });
        assertEquals(loaded.code, 0, loaded.stderr);
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: CLI details name what is wrong, and bad values exit 2", async () => {
  const extra = await run(["render", "extra-arg"]);
  assertEquals(extra.code, 2);
  assertMatch(extra.stderr, /render: unexpected argument "extra-arg"/);
  const missing = await run(["--source=file:/nonexistent/objects", "--proxy-mode=userspace"]);
  assertEquals(missing.code, 2, missing.stderr);
  assertMatch(missing.stderr, /^kube-proxy-deno: --source: "\/nonexistent\/objects": /);
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/kp.yaml`,
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvsx\n",
    );
    const cfg = await run([`--config=${dir}/kp.yaml`]);
    assertEquals(cfg.code, 2);
    assertMatch(cfg.stderr, new RegExp(`--config: ${dir}/kp.yaml: mode: Invalid value: "ipvsx"`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  const help = await run(["--help"]);
  assertMatch(
    help.stdout,
    /\n {2}--detect-local-mode LocalMode +how local pod traffic is told: ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix \(default ClusterCIDR\)\n/,
  );
  assertMatch(help.stdout, /\n {2}trace +where one new connection goes through the rules/);
  assertMatch(help.stdout, /\n {2}explain +why each kind of client reaches the pods/);
  // `trace --help` explains trace (its required flags missing is no error then).
  const traceHelp = await run(["trace", "--help"]);
  assertEquals([traceHelp.code, traceHelp.stderr], [0, ""]);
  assertMatch(traceHelp.stdout, /^Usage: kube-proxy-deno trace --dst IP --dport N \[flags\]\n/);
  assertMatch(
    traceHelp.stdout,
    /\n {2}--from node\|pod\|external +who opens the connection: a process on this node/,
  );
  // Each command's help is its own: render's names --node-ip, not the proxy's whole list.
  const renderHelp = await run(["render", "--help"]);
  assertEquals([renderHelp.code, renderHelp.stderr], [0, ""]);
  assertMatch(renderHelp.stdout, /^Usage: kube-proxy-deno render --source=file:PATH \[flags\]\n/);
  assertMatch(renderHelp.stdout, /\n {2}--node-ip IP\[,IP\] +the rendered node's addresses/);
  assert(!renderHelp.stdout.includes("--conntrack-min"), "render --help is not the general help");
  // A CIDR with host bits set is used as its network.
  const r = await run(["render", `--source=file:${ROOT}demo/objects.yaml`, "--cluster-cidr=10.244.1.0/16"]);
  assertEquals(r.code, 0, r.stderr);
  assert(r.stdout.includes(" ! -s 10.244.0.0/16 "), "normalised cluster CIDR in the rules");
  assert(!r.stdout.includes("10.244.1.0/16"));
});

Deno.test("main: a mode whose required tool is missing exits 1 naming it; no noise from Deno on start", async () => {
  const r = await run(["--proxy-mode=nftables", "--source=file:" + ROOT + "demo/objects.yaml"], {
    PATH: "/nonexistent",
  });
  assertEquals(r.code, 1, r.stderr);
  assertMatch(r.stderr, /nftables mode cannot run: nft not found on PATH/);
  assert(!r.stderr.includes("Permissions in the config file"), r.stderr);
  assert(!r.stderr.includes("Failed to resolve"), r.stderr);
  assert(!r.stderr.includes("\x1b["), "no colour codes when stderr is not a terminal");
});

Deno.test("main: render prints the live proxy's warnings on stderr; stdout stays the restore input", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/objects.yaml`,
      `apiVersion: v1
kind: Service
metadata: { namespace: evil, name: badip }
spec: { clusterIP: "10.0.0.1 -j ACCEPT", ports: [{ port: 80 }] }
---
apiVersion: v1
kind: Service
metadata: { namespace: default, name: good }
spec: { clusterIP: 172.30.0.10, ports: [{ name: http, port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: default, name: good-1, labels: { kubernetes.io/service-name: good } }
addressType: IPv4
ports: [{ name: http, port: 8080, protocol: TCP }]
endpoints:
- addresses: [10.1.0.1]
- addresses: [10.1.0.999]
`,
    );
    const r = await run(["render", `--source=file:${dir}`, "--hostname-override=node-a"]);
    assertEquals(r.code, 0, r.stderr);
    const lines = r.stderr.trim().split("\n");
    assertMatch(
      lines.at(-1)!,
      /^I\d{4} .* render\.ts:\d+\] "Rendered for these node addresses" addresses="none /,
    );
    const warnings = lines.slice(0, -1);
    assertEquals(warnings.length, 2, r.stderr);
    // klog's text: the message is quoted, so its own quotes are escaped.
    assert(
      warnings.some((w) =>
        /^W.*\] "Skipping malformed Service \\"evil\/badip\\": invalid spec.clusterIPs\[0\]/.test(w)
      ),
      r.stderr,
    );
    assert(
      warnings.some((w) =>
        /^W.*\] "Skipping malformed endpoint of EndpointSlice \\"default\/good-1\\": invalid endpoints\[1\]/
          .test(w)
      ),
      r.stderr,
    );
    assert(r.stdout.startsWith("# iptables-restore --noflush input\n"));
    assert(!r.stdout.includes("WRN"));
    // The valid endpoint of the slice is still programmed.
    assertMatch(r.stdout, /-A KUBE-SEP-\w+ -p tcp .* -j DNAT --to-destination 10.1.0.1:8080\n/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: --iptables-sync-period=1000h runs quietly (timers beyond 2^31 ms are chained)", async () => {
  const p = startUserspace([
    `--source=file:${ROOT}demo/objects.yaml`,
    "--iptables-sync-period=1000h",
    `--healthz-bind-address=127.0.0.1:${freePort()}`,
    `--metrics-bind-address=127.0.0.1:${freePort()}`,
    "--hostname-override=demo-node",
  ]);
  try {
    await eventually(() => assertMatch(p.log(), /Opened proxy port/), 10_000);
    await new Promise((r) => setTimeout(r, 1000));
  } finally {
    await p.stop();
  }
  assert(!p.log().includes("TimeoutOverflowWarning"), p.log().slice(0, 500));
  assert(p.log().split("\n").length < 12, p.log());
});

/** A ClusterIP Service `ns1/web` on `clusterIP` port 80 with ready endpoints `ips` (port 8080), as YAML. */
function serviceYaml(clusterIP: string, ips: readonly string[]): string {
  return `apiVersion: v1
kind: Service
metadata: { namespace: ns1, name: web }
spec:
  clusterIP: ${clusterIP}
  clusterIPs: [${clusterIP}]
  ports: [{ name: http, protocol: TCP, port: 80, targetPort: 8080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: ns1, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: http, protocol: TCP, port: 8080 }]
endpoints:
${ips.map((ip) => `  - { addresses: [${ip}], conditions: { ready: true }, nodeName: node-b }`).join("\n")}
`;
}

Deno.test("main: trace with interface-based local detection: --in-interface says where a packet comes in, for a pod by default the bridge", async () => {
  const dir = await Deno.makeTempDir();
  const local = ["--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0"];
  try {
    // One ClusterIP Service whose endpoints run on another node (a DNATed packet is forwarded).
    await Deno.writeTextFile(`${dir}/objects.yaml`, serviceYaml("172.30.0.10", ["10.244.2.7", "10.244.3.7"]));
    for (const mode of ["iptables", "nftables", "ipvs"]) {
      const rendered = await run([
        "render",
        `--source=file:${dir}/objects.yaml`,
        "--hostname-override=node-a",
        `--proxy-mode=${mode}`,
        ...local,
      ]);
      assertEquals(rendered.code, 0, rendered.stderr);
      await Deno.writeTextFile(`${dir}/${mode}`, rendered.stdout);
      const trace = async (...args: string[]) => {
        const r = await run([
          "trace",
          `--rules=${dir}/${mode}`,
          `--proxy-mode=${mode}`,
          ...local,
          "--dst=172.30.0.10",
          "--dport=80",
          "--output=json",
          ...args,
        ]);
        assertEquals(r.code, 0, r.stderr);
        return JSON.parse(r.stdout);
      };
      const pod = await trace("--from=pod", "--src=10.244.1.5");
      assertEquals(
        [pod.packet.inInterface, pod.packet.inInterfaceAssumed, pod.verdict, pod.masquerade],
        ["cbr0", "--pod-bridge-interface", "DNAT", false],
        `${mode}: from a pod, on the bridge`,
      );
      const unsaid = await trace("--from=external", "--src=192.168.0.10");
      assertEquals(unsaid.verdict, "UNKNOWN", `${mode}: from elsewhere, the interface unknown`);
      assertMatch(unsaid.unsupported.join(" "), /--in-interface/);
      const outside = await trace("--from=external", "--src=192.168.0.10", "--in-interface=eth0");
      assertEquals(
        [outside.packet.inInterface, outside.verdict, outside.masquerade],
        ["eth0", "DNAT", true],
        `${mode}: from elsewhere on eth0, masqueraded`,
      );
    }
    const bad = await run(["trace", "--dst=172.30.0.10", "--dport=80", "--from=node", "--in-interface=eth0"]);
    assertEquals(bad.code, 2);
    assertMatch(
      bad.stderr,
      /--in-interface: a packet from this node \(--from=node\) comes in on no interface/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: trace over rendered rules names the rules hit, the endpoints with their shares, and the verdict", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const rendered = await run([
      "render",
      `--source=file:${ROOT}demo/objects.yaml`,
      "--cluster-cidr=10.180.0.0/16",
    ]);
    assertEquals(rendered.code, 0, rendered.stderr);
    await Deno.writeTextFile(`${dir}/rules`, rendered.stdout);
    const text = await run([
      "trace",
      `--rules=${dir}/rules`,
      "--src=10.180.1.5",
      "--dst=172.30.0.10",
      "--dport=80",
    ]);
    assertEquals(text.code, 0, text.stderr);
    assertMatch(
      text.stdout,
      /^packet: tcp 10.180.1.5 -> 172.30.0.10:80 from pod\nrules: iptables mode, .*\/rules \(mode told from the rules\)\nnode addresses: this machine's \(.*\); --node-ip gives the file's node's\npath:\n {2}nat -A PREROUTING /,
    );
    assertMatch(text.stdout, /\n {4}nat -A KUBE-SERVICES -d 172.30.0.10\/32 .* -j KUBE-SVC-\w+\n/);
    assertMatch(
      text.stdout,
      /endpoints:\n {2}127.0.0.1:18081 {2}50.0%\n {2}127.0.0.1:18082 {2}50.0%\nmasquerade: no\nverdict: DNAT\n$/,
    );
    const json = await run([
      "trace",
      `--rules=${dir}/rules`,
      "--src=10.180.1.5",
      "--dst=172.30.0.99",
      "--dport=80",
      "--output=json",
    ]);
    assertEquals(JSON.parse(json.stdout).verdict, "none", "not a service");
    const usage = await run(["trace", "--dport=80"]);
    assertEquals(usage.code, 2);
    assertMatch(usage.stderr, /--dst: trace needs the destination address/);
    const misplaced = await run(["--dst=1.2.3.4"]);
    assertEquals(misplaced.code, 2);
    assertMatch(misplaced.stderr, /--dst: only the trace command takes it/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A Maglev NodePort Service (`kube-router.io/service.scheduler: mh`) with three endpoints. */
const MAGLEV_OBJECTS = `apiVersion: v1
kind: Service
metadata:
  namespace: default
  name: web
  annotations: { kube-router.io/service.scheduler: mh }
spec:
  type: NodePort
  clusterIP: 172.30.0.20
  clusterIPs: [172.30.0.20]
  ports: [{ name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30090 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  namespace: default
  name: web-1
  labels: { kubernetes.io/service-name: web }
addressType: IPv4
ports: [{ name: http, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [10.180.1.1], conditions: { ready: true } }
  - { addresses: [10.180.1.2], conditions: { ready: true } }
  - { addresses: [10.180.1.3], conditions: { ready: true } }
`;

Deno.test("main: render and trace show a Maglev Service's table, and the slot and endpoint each source port gets; iptables mode says it does not honour the annotation", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/objects.yaml`, MAGLEV_OBJECTS);
    const rendered = await run([
      "render",
      "--proxy-mode=nftables",
      `--source=file:${dir}/objects.yaml`,
      "--hostname-override=node-a",
      "--cluster-cidr=10.180.0.0/16",
      "--maglev-table-size=251",
      "--maglev-seed=7",
    ]);
    assertEquals(rendered.code, 0, rendered.stderr);
    assertMatch(
      rendered.stdout,
      /\n# mh-internal\/default\/web\/http\/m251-s00000007-5t: Maglev, 251 slots over 3 endpoints, slot = hash of the source address and port\n/,
    );
    assertMatch(
      rendered.stdout,
      /\nadd rule ip kube-proxy mh-internal\/default\/web\/http\/m251-s00000007-5t meta l4proto \{ tcp, udp, sctp \} th dport != 0 dnat ip to jhash ip saddr \. th sport mod 251 seed 0x00000007 map @mh-internal\/default\/web\/http\/m251-s00000007-5t\n/,
    );
    assert(!rendered.stderr.includes("service.scheduler"), rendered.stderr);
    // The iptables mode says it does not honour the annotation, rather than ignore it.
    const iptables = await run([
      "render",
      `--source=file:${dir}/objects.yaml`,
      "--hostname-override=node-a",
      "--cluster-cidr=10.180.0.0/16",
    ]);
    assertEquals(iptables.code, 0, iptables.stderr);
    assertMatch(
      iptables.stderr,
      /^W.*\] "Service \\"default\/web\\": kube-router.io\/service.scheduler \\"mh\\" is not honoured in iptables mode, which balances at random; nftables mode honours rr, sh, dh and mh"/m,
    );
    await Deno.writeTextFile(`${dir}/rules`, rendered.stdout);
    const table = maglevTable(["10.180.1.1:8080", "10.180.1.2:8080", "10.180.1.3:8080"], 251, 7);
    for (const sport of [40000, 40001, 51000]) {
      const t = await run([
        "trace",
        `--rules=${dir}/rules`,
        "--from=external",
        "--src=203.0.113.7",
        `--sport=${sport}`,
        "--node-ip=192.168.0.2",
        "--dst=172.30.0.20",
        "--dport=80",
      ]);
      assertEquals(t.code, 0, t.stderr);
      const slot = nftJhash([Uint8Array.of(203, 0, 113, 7), portBytes(sport)], 251, 7);
      assertMatch(
        t.stdout,
        new RegExp(`^packet: tcp 203\\.0\\.113\\.7:${sport} -> 172\\.30\\.0\\.20:80 from external`),
      );
      assert(
        t.stdout.includes(
          `pick: mh-internal/default/web/http/m251-s00000007-5t: jhash ip saddr . th sport mod 251 seed 0x00000007\n  Maglev slot ${slot} of 251 -> ${
            table[slot]
          }\nendpoints:\n  ${table[slot]}  100.0%\n`,
        ),
        t.stdout,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: render --proxy-mode=ipvs prints the ipset, iptables-restore and ipvsadm batches, and the fakes take them", async () => {
  const r = await run([
    "render",
    "--proxy-mode=ipvs",
    `--source=file:${ROOT}demo/objects.yaml`,
    "--hostname-override=demo-node",
    "--cluster-cidr=10.180.0.0/16",
    "--ipvs-scheduler=lc",
  ]);
  assertEquals(r.code, 0, r.stderr);
  const sections = r.stdout.split(/^# /m).filter((x) => x !== "");
  assertEquals(sections.map((x) => x.slice(0, x.indexOf("\n"))), [
    "ipset restore -exist input (IPv4)",
    "iptables-restore --noflush input",
    "ipvsadm -R input (IPv4)",
  ]);
  const body = (i: number) => sections[i].slice(sections[i].indexOf("\n") + 1);
  const ipset = new FakeIpset();
  await ipset.restore(body(0).trim().split("\n"));
  assertEquals(ipset.entries("KUBE-CLUSTER-IP"), ["172.30.0.10,tcp:80"]);
  const ipt = new FakeIPTables();
  await ipt.restoreAll(body(1), { flush: false, counters: false });
  assertEquals(ipt.rules("nat", "PREROUTING"), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  ]);
  const ipvs = new FakeIpvsadm();
  await ipvs.apply(body(2).trim().split("\n"));
  assertEquals(ipvs.services().get("TCP/172.30.0.10:80")?.scheduler, "lc");
  assertEquals(ipvs.reals("TCP/172.30.0.10:80")?.map((x) => `${x.address}:${x.port}`), [
    "127.0.0.1:18081",
    "127.0.0.1:18082",
  ]);
});

Deno.test("main: trace --proxy-mode=ipvs over rendered rules: the virtual server, its real servers, a rejected port", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const rendered = await run(["render", "--proxy-mode=ipvs", `--source=file:${ROOT}demo/objects.yaml`]);
    assertEquals(rendered.code, 0, rendered.stderr);
    await Deno.writeTextFile(`${dir}/rules`, rendered.stdout);
    const base = [
      "trace",
      "--proxy-mode=ipvs",
      `--rules=${dir}/rules`,
      "--src=10.180.1.5",
      "--dst=172.30.0.10",
    ];
    const ok = await run([...base, "--dport=80"]);
    assertEquals(ok.code, 0, ok.stderr);
    assertMatch(
      ok.stdout,
      /\n {2}ipvs -A -t 172.30.0.10:80 -s rr\n {4}ipvs -a -t 172.30.0.10:80 -r 127.0.0.1:18081 -m -w 1\n/,
    );
    assertMatch(
      ok.stdout,
      /endpoints:\n {2}127.0.0.1:18081 {2}50.0%\n {2}127.0.0.1:18082 {2}50.0%\n.*verdict: DNAT\n$/s,
    );
    const other = await run([...base, "--dport=81", "--output=json"]);
    assertEquals(JSON.parse(other.stdout).verdict, "REJECT", "a port the service address does not serve");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: --write-config-to writes upstream's format under the shipped permissions and changes nothing else", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kpd-writeconfig-" });
  try {
    const r = await run([
      `--write-config-to=${dir}/kp.yaml`,
      "--proxy-mode=nftables",
      "--conntrack-min=1000",
    ]);
    assertEquals(r.code, 0, r.stderr);
    assertMatch(r.stderr, new RegExp(`"Wrote configuration" file="${dir}/kp.yaml"`));
    const text = await Deno.readTextFile(`${dir}/kp.yaml`);
    assertMatch(text, /^apiVersion: kubeproxy.config.k8s.io\/v1alpha1\n/);
    assertMatch(text, /\nmode: nftables\n/);
    assertMatch(text, /\n {2}min: 1000\n/);
    // What it wrote starts the program as the flags did.
    const back = await run(["render", `--config=${dir}/kp.yaml`, `--source=file:${ROOT}demo/objects.yaml`]);
    assertEquals(back.code, 0, back.stderr);
    assertMatch(back.stdout, /add table ip kube-proxy/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: the metrics port serves /healthz, /proxyMode, /configz, /flagz and /statusz, as upstream's", async () => {
  const metricsPort = freePort();
  const proc = startUserspace([
    `--source=file:${ROOT}demo/objects.yaml`,
    "--hostname-override=demo-node",
    "--healthz-bind-address=",
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
    "--conntrack-min=65536",
  ]);
  const get = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${metricsPort}${path}`);
    return [r.status, await r.text()] as const;
  };
  try {
    await eventually(async () => assertEquals(await get("/healthz"), [200, "ok"]), 10_000);
    assertEquals(await get("/proxyMode"), [200, "userspace"]);
    const [code, configz] = await get("/configz");
    assertEquals(code, 200);
    const c = JSON.parse(configz)["kubeproxy.config.k8s.io"];
    assertEquals([c.mode, c.conntrack.min, c.hostnameOverride], ["userspace", 65536, "demo-node"]);
    const [, flagz] = await get("/flagz");
    assertMatch(flagz, /^kube-proxy flags\n/);
    for (const line of ["--proxy-mode=userspace", "--conntrack-min=65536", "--iptables-sync-period=30s"]) {
      assert(flagz.split("\n").includes(line), `${line} in ${flagz}`);
    }
    const [, statusz] = await get("/statusz");
    assertMatch(statusz, /\nStarted: .*\nUp: \d+ hr \d+ min \d+ sec\n/);
    assertMatch(statusz, /\nBinary version: kube-proxy-deno \S+\nEmulation version: 1\.37\n/);
    assertEquals((await get("/nope"))[0], 404);
  } finally {
    await proc.stop();
  }
});

Deno.test("main: Events as upstream's: Starting on the Node, FailedToStartMetricServer when its port is taken", async () => {
  const api = new TestApiServer();
  const url = api.start();
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const metricsPort = (taken.addr as Deno.NetAddr).port;
  const proc = startUserspace([
    "--hostname-override=node-a",
    `--master=${url}`,
    "--healthz-bind-address=",
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
  ]);
  try {
    const reasons = () => api.events.map((e) => e.event.reason);
    await eventually(() => assertEquals(reasons().sort(), ["FailedToStartMetricServer", "Starting"]), 15_000);
    const starting = api.events.find((e) => e.event.reason === "Starting")!;
    assertEquals(starting.namespace, "default");
    const { metadata, eventTime, reportingInstance, ...rest } = starting.event as Record<string, unknown>;
    assertEquals(rest, {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      reportingController: "kube-proxy",
      action: "StartKubeProxy",
      reason: "Starting",
      regarding: { kind: "Node", name: "node-a", uid: "node-a" },
      note: "",
      type: "Normal",
    });
    assertMatch((metadata as { name: string }).name, /^node-a\.[0-9a-f]+$/);
    assertMatch(String(eventTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assertMatch(String(reportingInstance), /^kube-proxy-/);
    const failed = api.events.find((e) => e.event.reason === "FailedToStartMetricServer")!.event;
    assertEquals([failed.type, (failed.regarding as { kind: string }).kind], ["Warning", "Node"]);
    assertMatch(String(failed.note), /in use/i);
  } finally {
    await proc.stop();
    taken.close();
    await api.stop();
  }
});

Deno.test("main: text logs in klog's shape: level letter, date and time, pid, caller, quoted message, fields", async () => {
  const r = await run([`--write-config-to=/nonexistent-dir/kp.yaml`]);
  assertEquals(r.code, 1, r.stderr);
  const line = r.stderr.split("\n").find((l) => l.includes("Cannot write the configuration"))!;
  assertMatch(
    line,
    /^E\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ main\.ts:\d+\] "Cannot write the configuration" file="\/nonexistent-dir\/kp\.yaml" error="[^"]+"$/,
  );
  const warn = r.stderr.split("\n").find((l) => l.includes("--config is set") || l.startsWith("W"));
  assert(warn === undefined || warn.startsWith("W"), r.stderr);
});

Deno.test("main: /healthz drains a node the autoscaler is removing (Node from the file source); /livez stays", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kpd-node-" });
  const healthzPort = freePort();
  const node = (taints: string) =>
    `apiVersion: v1\nkind: Node\nmetadata: { name: node-a }\nspec: { ${taints} }\n` +
    "status: { addresses: [{ type: InternalIP, address: 127.0.0.1 }] }\n";
  await Deno.writeTextFile(`${dir}/node.yaml`, node(""));
  const proc = startUserspace([
    `--source=file:${dir}`,
    "--hostname-override=node-a",
    `--healthz-bind-address=127.0.0.1:${healthzPort}`,
    "--metrics-bind-address=",
  ]);
  const get = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${healthzPort}${path}`);
    return [r.status, (await r.json()).nodeEligible] as const;
  };
  try {
    await eventually(async () => assertEquals(await get("/healthz"), [200, true]), 10_000);
    // Written aside and renamed, as tools write files.
    await Deno.writeTextFile(
      `${dir}/.node.tmp`,
      node("taints: [{ key: ToBeDeletedByClusterAutoscaler, value: '1732400000', effect: NoSchedule }]"),
    );
    await Deno.rename(`${dir}/.node.tmp`, `${dir}/node.yaml`);
    await eventually(async () => assertEquals(await get("/healthz"), [503, false]), 10_000);
    assertEquals(await get("/livez"), [200, undefined]);
  } finally {
    await proc.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: render takes the node's addresses from the Node object, or --node-ip, and says which", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kpd-render-node-" });
  try {
    const lb = `apiVersion: v1
kind: Service
metadata: { namespace: ns1, name: lb }
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.60
  clusterIPs: [172.30.0.60]
  loadBalancerSourceRanges: [192.168.0.0/24]
  ports: [{ name: p, port: 80, protocol: TCP, targetPort: 8080, nodePort: 30060 }]
status: { loadBalancer: { ingress: [{ ip: 192.168.99.60 }] } }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: ns1, name: lb-1, labels: { kubernetes.io/service-name: lb } }
addressType: IPv4
ports: [{ name: p, port: 8080, protocol: TCP }]
endpoints: [{ addresses: [10.180.0.60], conditions: { ready: true }, nodeName: node-b }]
`;
    await Deno.writeTextFile(`${dir}/lb.yaml`, lb);
    const render = (...extra: string[]) =>
      run(["render", `--source=file:${dir}`, "--hostname-override=node-a", ...extra]);
    // The rule that lets the load-balancer IP reach itself from an admitted node.
    const selfRule = /-A KUBE-FW-\w+ -s 192\.168\.99\.60\/32 .* -j KUBE-EXT-\w+\n/;
    const bare = await render();
    assertEquals(bare.code, 0, bare.stderr);
    assert(!selfRule.test(bare.stdout), "no node address known: the node is not admitted");
    assertMatch(
      bare.stderr,
      /"Rendered for these node addresses" addresses="none \(no Node object \\"node-a\\" in the source/,
    );
    const flag = await render("--node-ip=192.168.0.2");
    assertMatch(flag.stdout, selfRule);
    assertMatch(
      flag.stderr,
      /"Rendered for these node addresses" addresses="192\.168\.0\.2 \(--node-ip\)"\n/,
    );
    await Deno.writeTextFile(
      `${dir}/node.yaml`,
      "apiVersion: v1\nkind: Node\nmetadata: { name: node-a }\nstatus: { addresses: [{ type: InternalIP, address: 192.168.0.2 }, { type: Hostname, address: node-a }] }\n",
    );
    const node = await render();
    assertMatch(node.stdout, selfRule);
    assertMatch(
      node.stderr,
      /addresses="192\.168\.0\.2 \(the Node object \\"node-a\\"'s InternalIP and ExternalIP\)"/,
    );
    // The addresses decide NodePorts in nftables mode as well.
    const nft = await render("--proxy-mode=nftables");
    assertMatch(nft.stdout, /192\.168\.0\.2 \. tcp \. 30060 : goto external/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: explain over rendered rules: text and JSON, every kind of client with the kernel's answer; bad arguments exit 2", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kpd-explain-" });
  try {
    await Deno.writeTextFile(
      `${dir}/objects.yaml`,
      `apiVersion: v1
kind: Service
metadata: { namespace: shop, name: web }
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.80
  clusterIPs: [172.30.0.80]
  externalTrafficPolicy: Local
  healthCheckNodePort: 30900
  loadBalancerSourceRanges: [198.51.100.0/24]
  ports: [{ name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30800 }]
status: { loadBalancer: { ingress: [{ ip: 192.0.2.80 }] } }
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
`,
    );
    const common = [
      `--source=file:${dir}/objects.yaml`,
      "--hostname-override=node-a",
      "--cluster-cidr=10.244.0.0/16",
      "--node-ip=192.168.1.5",
    ];
    for (const mode of ["iptables", "nftables", "ipvs"]) {
      const r = await run(["explain", "shop/web", `--proxy-mode=${mode}`, "--output=json", ...common]);
      assertEquals(r.code, 0, r.stderr + r.stdout);
      const report = JSON.parse(r.stdout);
      assertEquals([report.schema, report.service, report.mode, report.rules, report.disagreements], [
        "kube-proxy-deno.explain/v1",
        "shop/web",
        mode,
        "rendered",
        0,
      ]);
      const [port] = report.ports;
      assertEquals(port.healthCheck, { nodePort: 30900, status: 200, localEndpoints: 1 });
      const byLabel = Object.fromEntries(
        port.clients.map((c: { label: string; via: string }) => [`${c.label} / ${c.via}`, c]),
      );
      assertEquals(Object.keys(byLabel).sort(), [
        "a pod on this node / cluster IP",
        "an external client / NodePort",
        "an external client inside loadBalancerSourceRanges / load balancer IP",
        "an external client outside loadBalancerSourceRanges / load balancer IP",
        "this node / cluster IP",
        ...(mode === "iptables" ? ["this node on 127.0.0.1 / NodePort"] : []),
      ]);
      // The external client reaches the local endpoint only, says why not the others, and the rendered rules agree.
      const ext = byLabel["an external client / NodePort"];
      assertEquals([ext.expected.endpoints, ext.agrees, ext.datapath.verdict], [
        ["10.244.1.5:8080"],
        true,
        "DNAT",
      ]);
      assertEquals(
        ext.expected.excluded.map((x: { endpoint: string; reason: string }) => [x.endpoint, x.reason]),
        [
          ["10.244.2.5:8080", "remote-external-local"],
          ["10.244.2.6:8080", "remote-external-local"],
        ],
      );
      const outside = byLabel["an external client outside loadBalancerSourceRanges / load balancer IP"];
      assertEquals([outside.expected.verdict, outside.expected.reason, outside.datapath.verdict], [
        "DROP",
        "source-range",
        "DROP",
      ]);
      const pod = byLabel["a pod on this node / cluster IP"];
      assertEquals([pod.expected.endpoints, pod.expected.masquerade], [
        ["10.244.1.5:8080", "10.244.2.5:8080"],
        false,
      ]);
      assertEquals(pod.expected.excluded, [{
        endpoint: "10.244.2.6:8080",
        reason: "not-ready",
        detail: "not ready",
      }]);
    }
    // The userspace mode: its portal rules rendered and its listeners' routes checked, nothing bound.
    const us = await run(["explain", "shop/web", "--proxy-mode=userspace", "--output=json", ...common]);
    assertEquals(us.code, 0, us.stderr + us.stdout);
    const usClients = JSON.parse(us.stdout).ports[0].clients;
    assert(usClients.length > 0 && usClients.every((c: { agrees: boolean }) => c.agrees === true), us.stdout);
    assertEquals(
      usClients.map((c: { datapath: { by: string } }) => c.datapath.by),
      usClients.map(() => "the userspace proxy's listeners"),
    );
    const text = await run(["explain", "shop/web", ...common]);
    assertEquals(text.code, 0, text.stderr);
    assertMatch(text.stdout, /^Service shop\/web: iptables mode, node node-a, rendered rules\n/);
    assertMatch(
      text.stdout,
      /\n {2}an external client \(203\.0\.113\.10\) -> 192\.168\.1\.5:30800 \(NodePort\):\n {4}reaches 10\.244\.1\.5:8080\n/,
    );
    assertMatch(
      text.stdout,
      /\n {4}not 10\.244\.2\.5:8080: on another node, and externalTrafficPolicy is Local\n/,
    );
    assert(text.stdout.split("\n").every((l) => l.length <= 80), "80 columns");
    assertMatch(text.stdout, /\nThe datapath agrees with the model for the 6 clients checked\.\n$/);
    const missing = await run(["explain", "shop/nope", ...common]);
    assertEquals(missing.code, 1);
    assertMatch(missing.stderr, /explain: no Service shop\/nope with a proxied port/);
    for (
      const [args, re] of [
        [["explain"], /explain: needs the Service as NAMESPACE\/NAME/],
        [["explain", "web"], /explain: "web" is not NAMESPACE\/NAME/],
        [["explain", "shop/web", "extra"], /explain: unexpected argument "extra"/],
        [["explain", "shop/web", "--dst=10.0.0.1"], /--dst: only the trace command takes it/],
        [["--port=80"], /--port: only the explain command takes it/],
      ] as const
    ) {
      const r = await run([...args]);
      assertEquals(r.code, 2, r.stderr);
      assertMatch(r.stderr, re);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: /debug/services on the metrics port answers explain's JSON, the list of Services, and nothing on the healthz port", async () => {
  const metricsPort = freePort();
  const healthzPort = freePort();
  const proc = startUserspace([
    `--source=file:${ROOT}demo/objects.yaml`,
    "--hostname-override=demo-node",
    `--healthz-bind-address=127.0.0.1:${healthzPort}`,
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
  ]);
  try {
    const base = `http://127.0.0.1:${metricsPort}/debug/services`;
    const list = await eventually(async () => {
      const r = await (await fetch(base)).json();
      assertEquals(r.services.length, 1);
      assert(r.services[0].applied !== null, "applied by a sync");
      return r;
    }, CONVERGE_MS);
    assertEquals(list.schema, "kube-proxy-deno.services/v1");
    const [svc] = list.services;
    assertEquals([svc.service, svc.ports, svc.endpoints], ["default/hello", ["http 80/TCP (IPv4)"], {
      usable: 2,
      total: 2,
    }]);
    assert(Date.parse(svc.applied) >= Date.parse(svc.changed), JSON.stringify(svc));
    const direct = await (await fetch(`${base}/default/hello`)).json();
    const cli = await run([
      "explain",
      "default/hello",
      "--output=json",
      `--metrics-bind-address=127.0.0.1:${metricsPort}`,
    ]);
    // The pod client is not asked without --cluster-cidr: not checked is exit 3, never agreement.
    assertEquals(cli.code, 3, cli.stderr);
    // Each report says when it was made; everything else is the same answer.
    const asked = JSON.parse(cli.stdout);
    assert(Date.parse(asked.reportedAt) >= Date.parse(direct.reportedAt), "the later ask is reported later");
    assertEquals(
      { ...asked, reportedAt: direct.reportedAt },
      direct,
      "the command prints what the endpoint answers",
    );
    assert(
      Date.parse(direct.lastSync) <= Date.parse(direct.reportedAt),
      "the proxy's last sync precedes the report",
    );
    assertEquals([direct.rules, direct.mode, direct.disagreements, direct.notChecked], [
      "live",
      "userspace",
      0,
      1,
    ]);
    assertEquals((await fetch(`${base}/default/nope`)).status, 404);
    const bad = await fetch(`${base}/Not_A/name`);
    assertEquals([bad.status, (await bad.json()).error], [400, 'not NAMESPACE/NAME: "Not_A/name"']);
    const onHealthz = await fetch(`http://127.0.0.1:${healthzPort}/debug/services`);
    await onHealthz.body?.cancel();
    assertEquals(onHealthz.status, 404, "not served on the healthz port");
  } finally {
    await proc.stop();
  }
});

Deno.test("main: SIGTERM at any moment of the start stops the program within 2 s (nothing waits on a signal that already fired)", async () => {
  for (let delayMs = 0; delayMs <= 700; delayMs += 50) {
    const child = new Deno.Command(Deno.execPath(), {
      args: hostStartArgs([
        "--proxy-mode=userspace",
        "--userspace-portals=false",
        `--source=file:${ROOT}demo/objects.yaml`,
        "--hostname-override=demo-node",
        "--healthz-bind-address=",
        `--metrics-bind-address=127.0.0.1:${freePort()}`,
      ]),
      stdout: "null",
      stderr: "null",
    }).spawn();
    await new Promise((r) => setTimeout(r, delayMs));
    child.kill("SIGTERM");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exited = await Promise.race([
      child.status.then(() => true),
      new Promise<false>((r) => timer = setTimeout(() => r(false), 2000)),
    ]);
    clearTimeout(timer);
    if (!exited) child.kill("SIGKILL");
    await child.status;
    assert(exited, `still running 2 s after a SIGTERM ${delayMs} ms into the start`);
  }
});
