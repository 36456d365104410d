/**
 * Drop-in behaviour on a real kernel, each in namespaces this test creates: the conntrack settings
 * of a KubeProxyConfiguration become the namespace's (0 leaves one alone), `--init-only` sets them
 * and writes no rule, `--oom-score-adj` is the process's (a choom that hangs holds nothing back), a
 * bad kubeconfig changes nothing, `--detect-local-mode` by interface masquerades by interface in
 * every kernel mode here, and the feature gates that act do (AllowServiceExternalIPs, KubeProxyIPVS;
 * an unknown one exits 2).
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { ANSWER_MS, CONVERGE_MS } from "../support/bounds.ts";
import { startArgs } from "../support/program.ts";
import { Topology } from "./netns.ts";
import type { ProxyProcess } from "../support/program.ts";
import { realKernel, sh, withNamespace } from "../support/namespace.ts";

const KEYS = {
  established: "net.netfilter.nf_conntrack_tcp_timeout_established",
  closeWait: "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
  liberal: "net.netfilter.nf_conntrack_tcp_be_liberal",
  udp: "net.netfilter.nf_conntrack_udp_timeout",
  udpStream: "net.netfilter.nf_conntrack_udp_timeout_stream",
  max: "net.netfilter.nf_conntrack_max",
  buckets: "net.netfilter.nf_conntrack_buckets",
  routeLocalnet: "net.ipv4.conf.all.route_localnet",
} as const;

/** The namespace's values of {@linkcode KEYS}. */
async function sysctls(t: Topology): Promise<Record<keyof typeof KEYS, string>> {
  // Listing conntrack loads the module, so its sysctls exist in every namespace.
  await t.exec(t.node, ["conntrack", "-L"], { allowFail: true });
  const out: Record<string, string> = {};
  for (const [k, key] of Object.entries(KEYS)) out[k] = (await t.exec(t.node, ["sysctl", "-n", key])).trim();
  return out as Record<keyof typeof KEYS, string>;
}

/** Every rule and table of the namespace, in every backend: what "nothing changed" compares. */
async function ruleset(t: Topology): Promise<string> {
  const out: string[] = [];
  for (
    const tool of ["iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"]
  ) {
    // Comments carry timestamps and chains their packet counters; tables and rules are what counts.
    out.push(
      (await t.exec(t.node, [tool], { allowFail: true })).split("\n").filter((l) => !l.startsWith("#"))
        .map((l) => l.replace(/ \[\d+:\d+\]$/, "")).join("\n"),
    );
  }
  out.push(
    (await t.exec(t.node, ["nft", "list", "ruleset"], { allowFail: true }))
      .replace(/counter packets \d+ bytes \d+/g, "counter"),
  );
  return out.join("\n");
}

const CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 2h0m0s
  tcpCloseWaitTimeout: 0s
  tcpBeLiberal: true
  udpTimeout: 45s
  udpStreamTimeout: 0s
`;

const kernel = await realKernel(["iptables-nft-save", "nft", "conntrack", "sysctl", "choom", "curl"]);
const test = (name: string, fn: (t: Topology, dir: string) => Promise<void>) =>
  Deno.test({
    name: `e2e drop-in: ${name}${kernel.note}`,
    ignore: kernel.ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const t = new Topology();
      const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-dropin-" });
      try {
        await t.init();
        await fn(t, dir);
      } finally {
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });

test(
  "--init-only sets the config file's conntrack timeouts (0s leaves one) and route_localnet, writes no rule, exits 0",
  async (t, dir) => {
    await Deno.writeTextFile(`${dir}/kp.yaml`, CONFIG);
    const before = await sysctls(t);
    const rulesBefore = await ruleset(t);
    const r = await t.runProgram([`--config=${dir}/kp.yaml`, "--init-only", `--source=file:${dir}`]);
    assertEquals(r.code, 0, r.stderr);
    assertMatch(r.stderr, /System initialized and --init-only flag set; exiting/);
    const after = await sysctls(t);
    assertEquals(after, {
      ...before,
      established: "7200",
      liberal: "1",
      udp: "45",
      routeLocalnet: "1",
    });
    assert(
      before.established !== "7200" && before.udp !== "45" && before.liberal === "0",
      JSON.stringify(before),
    );
    assertEquals(await ruleset(t), rulesBefore, "--init-only writes no rule");
  },
);

test(
  "feature gates: KubeProxyIPVS=false refuses ipvs mode (exit 1) having changed nothing; an unknown gate exits 2 naming it",
  async (t, dir) => {
    // The same conntrack settings --init-only applies above: refused, none of them is.
    await Deno.writeTextFile(
      `${dir}/kp.yaml`,
      CONFIG.replace("mode: iptables", "mode: ipvs") + "featureGates:\n  KubeProxyIPVS: false\n",
    );
    const before = await sysctls(t);
    const rulesBefore = await ruleset(t);
    const r = await t.runProgram([`--config=${dir}/kp.yaml`, `--source=file:${dir}`]);
    assertEquals(r.code, 1, r.stderr);
    assertMatch(
      r.stderr,
      /"Error running ProxyServer" err="the ipvs proxy mode is disabled by the KubeProxyIPVS feature gate; use --proxy-mode=nftables"/,
    );
    assertMatch(
      r.stderr,
      /Setting deprecated feature gate KubeProxyIPVS=false\. It will be removed in a future release\./,
    );
    assertEquals(await sysctls(t), before);
    assertEquals(await ruleset(t), rulesBefore);
    const bogus = await t.runProgram([`--source=file:${dir}`, "--feature-gates=Bogus=true"]);
    assertEquals(bogus.code, 2, bogus.stderr);
    assertMatch(
      bogus.stderr,
      /--feature-gates: Invalid value: \{"Bogus":true\}: unrecognized feature gate: Bogus/,
    );
  },
);

test(
  "a running proxy takes --oom-score-adj and the conntrack flags; liberal mode drops no INVALID packet",
  async (t, dir) => {
    const p = t.startProxy([
      `--source=file:${dir}`,
      "--hostname-override=node-a",
      // Raising needs no capability; lowering (upstream's -999) needs CAP_SYS_RESOURCE, which some
      // sandboxes (this machine's among them) withhold even from root: then it is a warning.
      "--oom-score-adj=600",
      "--conntrack-tcp-timeout-established=3h",
      "--conntrack-tcp-be-liberal",
      "--healthz-bind-address=127.0.0.1:10256",
      "--metrics-bind-address=127.0.0.1:10249",
    ]);
    await eventually(() => assertMatch(p.log(), /"Set oom_score_adj" value=600/), CONVERGE_MS);
    assertEquals((await Deno.readTextFile(`/proc/${p.pid}/oom_score_adj`)).trim(), "600");
    assertEquals((await sysctls(t)).established, "10800");
    await eventually(async () => {
      const forward = await t.exec(t.node, ["iptables-nft-save", "-t", "filter"]);
      assertMatch(forward, /-A KUBE-FORWARD .*-j ACCEPT/);
      assert(!forward.includes("INVALID"), forward);
    }, CONVERGE_MS);
  },
);

test(
  "a choom that never answers holds back neither the status pages, the first sync nor the stop",
  async (t, dir) => {
    // The choom found first on the PATH writes down its pid and hangs.
    await Deno.mkdir(`${dir}/bin`);
    await Deno.writeTextFile(`${dir}/bin/choom`, `#!/bin/sh\necho $$ > ${dir}/choom.pid\nexec sleep 3600\n`, {
      mode: 0o755,
    });
    const p = t.startProxy(
      [
        `--source=file:${dir}`,
        "--hostname-override=node-a",
        "--oom-score-adj=600",
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
      ],
      t.node,
      { PATH: `${dir}/bin:${Deno.env.get("PATH")}` },
    );
    const choom = await eventually(async () => {
      const pid = Number(await Deno.readTextFile(`${dir}/choom.pid`));
      assert(pid > 0, "its pid written whole");
      return pid;
    }, CONVERGE_MS);
    try {
      await eventually(async () => {
        assertMatch(p.log(), /First sync in the kernel/);
        assertMatch(await t.exec(t.node, ["iptables-nft-save", "-t", "filter"]), /-A KUBE-FORWARD /);
        assertEquals(
          await t.exec(t.node, [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "http://127.0.0.1:10256/healthz",
          ]),
          "200",
        );
      }, CONVERGE_MS);
      assert(await alive(choom), "choom still hangs while the proxy serves");
      const status = await p.stop();
      assertEquals(status.code, 0, p.log());
      assert(!await alive(choom), "the stop ended the choom still running");
      assert(!p.log().includes("OOMScore"), p.log());
    } finally {
      // A failure above leaves no sleeper behind.
      if (await alive(choom)) Deno.kill(choom, "SIGKILL");
    }
  },
);

/** Whether process `pid` is still running (not a zombie). */
async function alive(pid: number): Promise<boolean> {
  try {
    return !/^State:\s+Z/m.test(await Deno.readTextFile(`/proc/${pid}/status`));
  } catch {
    return false;
  }
}

test(
  "the iptables mode's INVALID drop follows the kernel's nf_conntrack_tcp_be_liberal, whoever set it; the nftables mode drops none, as upstream's",
  async (t, dir) => {
    /** Whether the forward chain drops INVALID packets, once the proxy has written that chain. */
    const invalidDrop = async (mode: string) => {
      const chain = mode === "iptables"
        ? (await t.exec(t.node, ["iptables-nft-save", "-t", "filter"])).split("\n")
          .filter((l) => l.startsWith("-A KUBE-FORWARD ")).join("\n")
        : await t.exec(t.node, ["nft", "list", "chain", "ip", "kube-proxy", "filter-forward"], {
          allowFail: true,
        });
      assert(/ACCEPT|accept|jump|goto/.test(chain), `the forward chain is written: ${chain}`);
      return /--ctstate INVALID (-m nfacct --nfacct-name +\S+ )?-j DROP|ct state invalid drop/.test(chain);
    };
    for (const mode of ["iptables", "nftables"]) {
      for (const liberal of ["1", "0"]) {
        // Set by someone else before the start (no --conntrack-tcp-be-liberal): the kernel decides.
        await t.exec(t.node, ["conntrack", "-L"], { allowFail: true });
        await t.exec(t.node, ["sysctl", "-q", "-w", `${KEYS.liberal}=${liberal}`]);
        const p = t.startProxy([
          `--source=file:${dir}`,
          "--hostname-override=node-a",
          `--proxy-mode=${mode}`,
        ]);
        try {
          await eventually(
            async () => assertEquals(await invalidDrop(mode), mode === "iptables" && liberal === "0"),
            CONVERGE_MS,
          );
          if (liberal === "1" && mode === "iptables") {
            assertMatch(
              p.log(),
              /nf_conntrack_tcp_be_liberal set, not installing DROP rules for INVALID packets/,
            );
          }
        } finally {
          await p.stop();
        }
      }
    }
  },
);

/** Waits for `p` to exit at most `ms` after now; returns its exit code and how long it took. */
async function exitWithin(p: ProxyProcess, ms: number): Promise<{ code: number; ms: number }> {
  const start = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const status = await Promise.race([
    p.exited,
    new Promise<undefined>((r) => timer = setTimeout(() => r(undefined), ms)),
  ]);
  clearTimeout(timer);
  assert(status !== undefined, `still running ${ms} ms after the change:\n${p.log()}`);
  return { code: status.code, ms: Math.round(performance.now() - start) };
}

test(
  "a changed --config file ends the proxy (exit 1, upstream's line naming the file) so it restarts with it; the same bytes rewritten do not; a ConfigMap's ..data swap does",
  async (t, dir) => {
    const config = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
`;
    // A plain file, edited in place.
    await Deno.mkdir(`${dir}/plain`);
    const plain = `${dir}/plain/config.conf`;
    await Deno.writeTextFile(plain, config);
    const args = [`--source=file:${dir}`, "--hostname-override=node-a"];
    let p = t.startProxy([`--config=${plain}`, ...args]);
    await eventually(() => assertMatch(p.log(), /Starting kube-proxy-deno/), CONVERGE_MS);
    await Deno.writeTextFile(plain, config);
    await new Promise((r) => setTimeout(r, 1000));
    assertEquals(p.log().includes("configuration file was updated"), false, "the same bytes change nothing");
    await Deno.writeTextFile(plain, config + "# v=2\n");
    const edited = await exitWithin(p, CONVERGE_MS);
    assertEquals(edited.code, 1, p.log());
    assertMatch(
      p.log(),
      /E\d{4} [\d:.]+ +\d+ main\.ts:\d+\] "Error running ProxyServer" err="content of the proxy server's configuration file was updated" file=".*\/plain\/config\.conf"/,
    );
    // As kubelet projects a ConfigMap: config.conf -> ..data/config.conf, ..data -> a dated directory,
    // and an update swaps ..data by a rename.
    const cm = `${dir}/configmap`;
    await Deno.mkdir(`${cm}/..2026_01`, { recursive: true });
    await Deno.writeTextFile(`${cm}/..2026_01/config.conf`, config);
    await Deno.symlink("..2026_01", `${cm}/..data`);
    await Deno.symlink("..data/config.conf", `${cm}/config.conf`);
    p = t.startProxy([`--config=${cm}/config.conf`, ...args]);
    await eventually(() => assertMatch(p.log(), /Starting kube-proxy-deno/), CONVERGE_MS);
    await Deno.mkdir(`${cm}/..2026_02`);
    await Deno.writeTextFile(
      `${cm}/..2026_02/config.conf`,
      config.replace("mode: nftables", "mode: iptables"),
    );
    await Deno.symlink("..2026_02", `${cm}/..data_tmp`);
    await Deno.rename(`${cm}/..data_tmp`, `${cm}/..data`);
    const swapped = await exitWithin(p, CONVERGE_MS);
    assertEquals(swapped.code, 1, p.log());
    assertMatch(p.log(), /configuration file was updated" file=".*\/configmap\/config\.conf"/);
  },
);

test(
  "health check node ports listen where NodePorts answer: --nodeport-addresses keeps them off the node's other addresses",
  async (t, dir) => {
    await Deno.writeTextFile(
      `${dir}/lb.yaml`,
      `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: lb }
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 30007
  clusterIP: 172.30.0.21
  clusterIPs: [172.30.0.21]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30021 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: lb-1, labels: { kubernetes.io/service-name: lb } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [10.180.1.2], conditions: { ready: true }, nodeName: node-a }
`,
    );
    const args = [`--source=file:${dir}`, "--hostname-override=node-a"];
    const hc = (host: string) => t.nodeAgent.http(host, 30007, ANSWER_MS);
    for (const mode of ["iptables", "nftables"]) {
      const p = t.startProxy([...args, `--proxy-mode=${mode}`, "--nodeport-addresses=192.168.0.0/24"]);
      try {
        await eventually(
          async () => assertMatch(await hc(t.nodeIP), /^200 .*"localEndpoints":1/),
          CONVERGE_MS,
        );
        const lo = await hc("127.0.0.1");
        assertMatch(lo, /^ERR /, `${mode}: not on 127.0.0.1: ${lo}`);
      } finally {
        await p.stop();
      }
    }
    // Without --nodeport-addresses (iptables mode's default): every address.
    const p = t.startProxy([...args, "--proxy-mode=iptables"]);
    try {
      await eventually(async () => assertMatch(await hc("127.0.0.1"), /^200 /), CONVERGE_MS);
      assertMatch(await hc(t.nodeIP), /^200 /);
    } finally {
      await p.stop();
    }
  },
);

test(
  "a bad kubeconfig (missing, its server a placeholder, its CA not PEM) exits 1 naming the file and field, and the node keeps every rule and sysctl as it was; a server that is down is retried",
  async (t, dir) => {
    await Deno.writeTextFile(
      `${dir}/kp.yaml`,
      CONFIG.replace(
        "mode: iptables",
        "mode: iptables\nclientConnection:\n  kubeconfig: /nonexistent/kubeconfig",
      ),
    );
    // The shipped DaemonSet's kubeconfig with its placeholder left in, and one whose CA is no PEM.
    const kubeconfig = (server: string, ca: string) =>
      `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "${server}", certificate-authority: ${ca} } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
users: [{ name: u, user: { token: t } }]
`;
    await Deno.writeTextFile(`${dir}/ca.crt`, "not a certificate\n");
    await Deno.writeTextFile(
      `${dir}/placeholder.conf`,
      kubeconfig("https://CONTROL-PLANE-ENDPOINT:6443", "ca.crt"),
    );
    await Deno.writeTextFile(`${dir}/bad-ca.conf`, kubeconfig("https://10.0.0.1:6443", "ca.crt"));
    const before = await sysctls(t);
    const rulesBefore = await ruleset(t);
    for (
      const [args, said] of [
        [
          ["--kubeconfig=/nonexistent/kubeconfig"],
          /Cannot reach the API server as configured.*\/nonexistent\/kubeconfig/,
        ],
        [["--proxy-mode=nftables", "--kubeconfig=/nonexistent/kubeconfig"], /\/nonexistent\/kubeconfig/],
        [[`--config=${dir}/kp.yaml`], /\/nonexistent\/kubeconfig/],
        [
          [`--kubeconfig=${dir}/placeholder.conf`],
          /placeholder\.conf: clusters\[\\?"c\\?"\]\.server is the placeholder CONTROL-PLANE-ENDPOINT/,
        ],
        [
          ["--proxy-mode=nftables", `--kubeconfig=${dir}/bad-ca.conf`],
          /bad-ca\.conf: clusters\[\\?"c\\?"\]\.certificate-authority \(.*\/ca\.crt\) is not PEM/,
        ],
      ] as const
    ) {
      const r = await t.runProgram([...args, "--hostname-override=node-a"]);
      assertEquals(r.code, 1, r.stderr);
      assertMatch(r.stderr, said);
      assertEquals(await sysctls(t), before, args.join(" "));
      assertEquals(await ruleset(t), rulesBefore, args.join(" "));
    }
    // A valid kubeconfig whose server is down (an outage, not a mistake) is retried, never an exit.
    await Deno.copyFile(new URL("../testdata/tls/ca.crt", import.meta.url), `${dir}/ca.crt`);
    await Deno.writeTextFile(`${dir}/down.conf`, kubeconfig("https://127.0.0.1:1", "ca.crt"));
    const down = t.startProxy([`--kubeconfig=${dir}/down.conf`, "--hostname-override=node-a"]);
    try {
      await eventually(() =>
        assertMatch(down.log(), /Watch failed; keeping the last known state and retrying/)
      );
      const exited = await Promise.race([
        down.exited,
        new Promise((r) => setTimeout(() => r("running"), 2000)),
      ]);
      assertEquals(exited, "running", down.log());
    } finally {
      await down.stop();
    }
  },
);

/** A Service 172.30.0.20:9000 whose one endpoint is `ip`'s who-am-I server on 9000. */
function whoService(ip: string): string {
  return `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: who }
spec:
  clusterIP: 172.30.0.20
  clusterIPs: [172.30.0.20]
  ports: [{ name: p, protocol: TCP, port: 9000, targetPort: 9000 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: who-1, labels: { kubernetes.io/service-name: who } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 9000 }]
endpoints:
  - { addresses: [${ip}], conditions: { ready: true }, nodeName: node-a }
`;
}

for (const mode of ["iptables", "nftables"]) {
  test(
    `${mode}: --detect-local-mode=BridgeInterface and InterfaceNamePrefix masquerade by input interface`,
    async (t, dir) => {
      const server = await t.addPod("pod-a", 8080); // 10.180.1.2, on veth kp<id>h1
      const veth = await t.addPod("pod-b", 8080); // 10.180.2.2, on veth kp<id>h2
      const bridged = await t.addBridgePod("cbr0"); // 10.181.0.2, on bridge cbr0
      const client = await t.addClient(); // 192.168.0.10, from outside
      assert((await server.agent.request({ op: "whoami", port: 9000 })).ok);
      await Deno.writeTextFile(`${dir}/who.yaml`, whoService(server.ip));
      const ask = async (from: { agent: { tcp(h: string, p: number): Promise<string> } }) =>
        await from.agent.tcp("172.30.0.20", 9000);
      for (
        const [flags, local, masqueraded] of [
          [["--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0"], bridged, veth],
          [
            ["--detect-local-mode=InterfaceNamePrefix", `--pod-interface-name-prefix=kp${t.id}h`],
            veth,
            bridged,
          ],
        ] as const
      ) {
        const p = t.startProxy([
          `--proxy-mode=${mode}`,
          `--source=file:${dir}`,
          "--hostname-override=node-a",
          "--iptables-min-sync-period=100ms",
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
          ...flags,
        ]);
        try {
          // Traffic that came in on a pod interface keeps its source; everything else is masqueraded
          // to the node's address on the server's link.
          await eventually(async () => assertEquals(await ask(local), local.ip), CONVERGE_MS);
          assertEquals(await ask(masqueraded), "10.180.1.1", flags.join(" "));
          assertEquals(await ask(client), "10.180.1.1", flags.join(" "));
          // trace agrees over the live rules, the input interface told by the route to the source.
          for (
            const [who, from, masquerade] of [
              [local, "pod", false],
              [masqueraded, "pod", true],
              [client, "external", true],
            ] as const
          ) {
            const r = await t.runProgram([
              "trace",
              `--proxy-mode=${mode}`,
              ...flags,
              "--dst=172.30.0.20",
              "--dport=9000",
              `--from=${from}`,
              `--src=${who.ip}`,
              "--output=json",
            ]);
            assertEquals(r.code, 0, r.stderr);
            const j = JSON.parse(r.stdout);
            assertEquals(
              [j.verdict, j.masquerade],
              ["DNAT", masquerade],
              `${flags.join(" ")} from ${who.ip}`,
            );
            assertEquals(j.packet.inInterfaceAssumed, `the route to ${who.ip} uses it`);
          }
        } catch (e) {
          await p.stop();
          console.error(p.log());
          throw e;
        }
        assertEquals((await p.stop()).code, 0);
      }
    },
  );
}

test(
  "a read-only /proc/sys (an unprivileged container): one warning naming each setting, and the proxy goes on",
  async (t, dir) => {
    await Deno.writeTextFile(`${dir}/kp.yaml`, CONFIG);
    const before = await sysctls(t);
    // A mount namespace of its own inside the test's network namespace: the host's /proc/sys is untouched.
    const out = await new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        t.node,
        "unshare",
        "-m",
        "--",
        "sh",
        "-c",
        'mount --bind -o ro /proc/sys /proc/sys && exec "$@"',
        "sh",
        Deno.execPath(),
        ...startArgs([`--config=${dir}/kp.yaml`, "--init-only", `--source=file:${dir}`]),
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assertEquals(out.code, 0, stderr);
    const warning = stderr.split("\n").filter((l) => l.includes("Cannot set these conntrack settings"));
    assertEquals(warning.length, 1, stderr);
    for (const key of [KEYS.established, KEYS.liberal, KEYS.udp]) assertMatch(warning[0], new RegExp(key));
    assertMatch(stderr, /Cannot enable route_localnet/);
    assertEquals(await sysctls(t), before);
  },
);

Deno.test({
  name:
    `trace from the node takes the source the kernel's route picks, not the first interface's${kernel.note}`,
  ignore: kernel.ignore,
  async fn() {
    await withNamespace(async (exec) => {
      const ns = exec.ns;
      const ip = (...args: string[]) => sh("ip", ["netns", "exec", ns, "ip", ...args]);
      // A pod-side link first (its address is in the cluster CIDR), then the node's own link.
      await ip("link", "add", "pod0", "type", "veth", "peer", "name", "pod0p");
      await ip("addr", "add", "10.180.0.1/24", "dev", "pod0");
      await ip("link", "add", "eth0", "type", "veth", "peer", "name", "eth0p");
      await ip("addr", "add", "192.168.0.2/24", "dev", "eth0");
      for (const l of ["pod0", "pod0p", "eth0", "eth0p"]) await ip("link", "set", l, "up");
      await ip("route", "add", "default", "via", "192.168.0.1");
      const rendered = await new Deno.Command(Deno.execPath(), {
        args: startArgs([
          "render",
          `--source=file:${new URL("../../demo/objects.yaml", import.meta.url).pathname}`,
          "--cluster-cidr=10.180.0.0/16",
        ]),
      }).output();
      const r = await exec.run("iptables-restore", {
        args: ["--noflush"],
        stdin: new TextDecoder().decode(rendered.stdout),
      });
      assertEquals(r.code, 0, r.stderr);
      const traced = await new Deno.Command("ip", {
        args: [
          "netns",
          "exec",
          ns,
          Deno.execPath(),
          ...startArgs(["trace", "--dst=172.30.0.10", "--dport=80", "--output=json"]),
        ],
      }).output();
      const report = JSON.parse(new TextDecoder().decode(traced.stdout));
      assertEquals(
        { src: report.packet.src, srcAssumed: report.packet.srcAssumed, masquerade: report.masquerade },
        { src: "192.168.0.2", srcAssumed: "the node's route to 172.30.0.10 picks it", masquerade: true },
        new TextDecoder().decode(traced.stderr),
      );
    });
  },
});

for (const mode of ["iptables", "nftables"]) {
  test(
    `${mode}: AllowServiceExternalIPs=false leaves a Service's external IP unserved, its cluster IP served`,
    async (t, dir) => {
      const pod = await t.addPod("pod-a", 8080);
      const client = await t.addClient(); // 192.168.0.10, routes service and external IPs via the node
      await Deno.writeTextFile(
        `${dir}/ext.yaml`,
        `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: ext }
spec:
  clusterIP: 172.30.0.30
  clusterIPs: [172.30.0.30]
  externalIPs: [192.168.99.30]
  ports: [{ name: p, protocol: TCP, port: 80, targetPort: 8080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: ext-1, labels: { kubernetes.io/service-name: ext } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 8080 }]
endpoints:
  - { addresses: [${pod.ip}], conditions: { ready: true }, nodeName: node-a }
`,
      );
      for (const allowed of [true, false]) {
        const p = t.startProxy([
          `--proxy-mode=${mode}`,
          `--source=file:${dir}`,
          "--hostname-override=node-a",
          "--healthz-bind-address=127.0.0.1:10256",
          "--metrics-bind-address=127.0.0.1:10249",
          `--feature-gates=AllowServiceExternalIPs=${allowed}`,
        ]);
        try {
          await eventually(
            async () => assertEquals(await client.agent.tcp("172.30.0.30", 80), "pod-a"),
            CONVERGE_MS,
          );
          // The rules of the run before stay until this one's first sync replaces them.
          const viaExternal = (ms: number) => client.agent.tcp("192.168.99.30", 80, ms);
          if (allowed) assertEquals(await viaExternal(ANSWER_MS), "pod-a");
          else {
            await eventually(async () => {
              const r = await viaExternal(1000);
              assert(r.startsWith("ERR"), `the external IP answered: ${r}`);
            }, CONVERGE_MS);
            assertEquals(await client.agent.tcp("172.30.0.30", 80), "pod-a");
            assertMatch(
              p.log(),
              /"Service \\"e2e\/ext\\": spec.externalIPs are not served: feature gate AllowServiceExternalIPs is false/,
            );
          }
        } finally {
          await p.stop();
        }
      }
    },
  );
}

test(
  "a file source that does not parse, or names no one node to act for, is refused at start (exit 1 naming FILE:LINE, exit 2 naming the Nodes and the flag) with the node's rules and sysctls as they were, another mode's rules included",
  async (t, dir) => {
    const node = (name: string) => `apiVersion: v1\nkind: Node\nmetadata: { name: ${name} }\n---\n`;
    const svc = `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec: { clusterIP: 172.30.0.70, clusterIPs: [172.30.0.70], ports: [{ name: p, protocol: TCP, port: 80 }] }
`;
    // The node runs the iptables mode now: a refused switch to nftables must leave its rules.
    await Deno.writeTextFile(`${dir}/objects.yaml`, node("node-a") + svc);
    const first = t.startProxy(["--proxy-mode=iptables", `--source=file:${dir}`]);
    await eventually(
      async () => assertMatch(await t.exec(t.node, ["iptables-nft-save"]), /172\.30\.0\.70/),
    );
    await first.stop();
    const before = await sysctls(t);
    const rulesBefore = await ruleset(t);
    const cases = [
      // A typo on line 4 of the one file.
      [node("node-a") + svc.replace("spec: {", "spec: {{"), [], 1, /--source: .*objects\.yaml:\d+: /],
      [
        node("node-a") + node("node-b") + svc,
        [],
        2,
        /--hostname-override: the source defines 2 Nodes \(node-a, node-b\); name the node to act for/,
      ],
      [
        node("node-a") + svc,
        ["--hostname-override=node-z"],
        2,
        /--hostname-override: "node-z" names no Node of the source: the source defines one Node \(node-a\)/,
      ],
    ] as const;
    for (const [text, args, code, said] of cases) {
      await Deno.writeTextFile(`${dir}/objects.yaml`, text);
      const r = await t.runProgram(["--proxy-mode=nftables", `--source=file:${dir}`, ...args]);
      assertEquals(r.code, code, r.stderr);
      assertMatch(r.stderr, said);
      assertMatch(r.stderr, /nothing on this node was changed/);
      assertEquals(await sysctls(t), before, String(said));
      assertEquals(await ruleset(t), rulesBefore, String(said));
    }
  },
);

test(
  "what a start and --cleanup did to the node is said at the default verbosity: the first sync (Services, endpoints, time), another mode's rules removed with their count, what --cleanup removed or that there was nothing",
  async (t, dir) => {
    const svc = `apiVersion: v1
kind: Service
metadata: { namespace: e2e, name: web }
spec: { clusterIP: 172.30.0.71, clusterIPs: [172.30.0.71], ports: [{ name: p, protocol: TCP, port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: e2e, name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: p, protocol: TCP, port: 80 }]
endpoints: [{ addresses: [10.180.9.9], conditions: { ready: true }, nodeName: node-a }]
`;
    await Deno.writeTextFile(`${dir}/objects.yaml`, svc);
    const args = [`--source=file:${dir}`, "--hostname-override=node-a"];
    const first = t.startProxy(["--proxy-mode=iptables", ...args, "-v=4"]);
    await eventually(() =>
      assertMatch(first.log(), /"First sync in the kernel" services=1 endpoints=1 sinceStartMs=\d+/)
    );
    // The code only loading touched is given back before the first sync builds on it, and the
    // start's before the proxy runs on (debug lines: the sizes the kernel was asked to reclaim).
    const log = await eventually(() => {
      const log = first.log();
      assertMatch(log, /"Gave back what the start alone used" codeMiB=[1-9]/);
      return log;
    });
    const loading = /"Gave back what loading the program used" codeMiB=[1-9]/.exec(log);
    assert(loading !== null, log);
    const synced = log.indexOf('"First sync in the kernel"');
    assert(loading.index < synced && log.indexOf('"Gave back what the start alone used"') > synced, log);
    await first.stop();
    // The nftables mode takes the node over: the iptables mode's rules go, and it says how many;
    // what that cleanup read (the whole tables) is given back with the start's garbage, after it.
    const second = t.startProxy(["--proxy-mode=nftables", ...args, "-v=4"]);
    const took = await eventually(() => {
      const log = second.log();
      assertMatch(log, /"Gave back what the start alone used"/);
      return log;
    });
    const removed = /"Removed the iptables mode's rules" mode="iptables" removed="IPv4: \d+ chains/.exec(
      took,
    );
    assert(removed !== null, took);
    assert(removed.index < took.indexOf('"Gave back what the start alone used"'), took);
    await second.stop();
    const cleanup = await t.runProgram(["--cleanup"]);
    assertEquals(cleanup.code, 0, cleanup.stderr);
    assertMatch(
      cleanup.stderr,
      /"Removed the nftables mode's rules" mode="nftables" removed="IPv4: table ip kube-proxy \(\d+ chains\)/,
    );
    const again = await t.runProgram(["--cleanup"]);
    assertMatch(again.stderr, /"Nothing to remove: no mode's rules on this node"/);
  },
);
