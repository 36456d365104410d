import { assertEquals, assertMatch, assertThrows } from "../../tests/assert.ts";
import { UsageError } from "../errors.ts";
import { parseCommandLine } from "./flags.ts";

const noFile = (): string => {
  throw new Error("no such file");
};

Deno.test("parseCommandLine: defaults match upstream kube-proxy", () => {
  const { command, config } = parseCommandLine([], noFile);
  assertEquals(command, "run");
  assertEquals(config.mode, "iptables");
  assertEquals([config.syncPeriodMs, config.minSyncPeriodMs, config.configSyncPeriodMs], [
    30_000,
    1000,
    900_000,
  ]);
  assertEquals(config.healthzBindAddress, { hostname: "0.0.0.0", port: 10256 });
  assertEquals(config.metricsBindAddress, { hostname: "127.0.0.1", port: 10249 });
  assertEquals([config.masqueradeBit, config.udpIdleTimeoutMs, config.localhostNodePorts], [14, 250, true]);
  assertEquals(config.source, { kind: "kubernetes" });
});

Deno.test("parseCommandLine: every flag is read", () => {
  const { config } = parseCommandLine([
    "--proxy-mode=userspace",
    "--kubeconfig",
    "/etc/k.conf",
    "--master=https://10.0.0.1:6443",
    "--hostname-override=Node-A",
    "--bind-address=127.0.0.1",
    "--cluster-cidr=10.180.0.0/16,fd00::/48",
    "--nodeport-addresses=192.168.0.0/24",
    "--masquerade-all",
    "--iptables-masquerade-bit=15",
    "--iptables-localhost-nodeports=false",
    "--iptables-backend=legacy",
    "--iptables-sync-period=1m30s",
    "--iptables-min-sync-period=500ms",
    "--config-sync-period=0",
    "--healthz-bind-address=[::1]:9999",
    "--metrics-bind-address=",
    "--udp-timeout=1s",
    "--proxy-port-range=40000+10",
    "--detect-local-mode=NodeCIDR",
    "--v=4",
    "--logging-format=json",
    "--source=file:/tmp/x",
    "--ipvs-scheduler=sh",
    "--ipvs-exclude-cidrs=10.99.0.0/16",
    "--ipvs-strict-arp=true",
    "--ipvs-tcp-timeout=900s",
    "--ipvs-tcpfin-timeout=2m",
    "--ipvs-udp-timeout=5m",
    "--ipvs-sync-period=45s",
    "--ipvs-min-sync-period=2s",
    "--tcp-idle-timeout=10m",
    "--tcp-write-timeout=0",
  ], noFile);
  assertEquals(config, {
    mode: "userspace",
    kubeconfig: "/etc/k.conf",
    master: "https://10.0.0.1:6443",
    hostnameOverride: "node-a",
    bindAddress: "127.0.0.1",
    clusterCIDRs: ["10.180.0.0/16", "fd00::/48"],
    nodePortAddresses: ["192.168.0.0/24"],
    masqueradeAll: true,
    masqueradeBit: 15,
    localhostNodePorts: false,
    iptablesBackend: "legacy",
    userspacePortals: true,
    detectLocalMode: "NodeCIDR",
    syncPeriodMs: 90_000,
    minSyncPeriodMs: 500,
    configSyncPeriodMs: 0,
    healthzBindAddress: { hostname: "::1", port: 9999 },
    metricsBindAddress: undefined,
    udpIdleTimeoutMs: 1000,
    tcpIdleTimeoutMs: 600_000,
    tcpWriteTimeoutMs: 0,
    portRange: { min: 40000, max: 40010 },
    verbosity: 4,
    loggingFormat: "json",
    source: { kind: "file", path: "/tmp/x" },
    ipvs: {
      scheduler: "sh",
      excludeCIDRs: ["10.99.0.0/16"],
      strictARP: true,
      tcpTimeoutMs: 900_000,
      tcpFinTimeoutMs: 120_000,
      udpTimeoutMs: 300_000,
      syncPeriodMs: 45_000,
      minSyncPeriodMs: 2_000,
    },
  });
});

Deno.test("parseCommandLine: each bad value names the flag and the value", () => {
  const cases: Array<[string[], RegExp]> = [
    [["--ipvs-scheduler=fast"], /^--ipvs-scheduler: invalid value "fast" \(rr, wrr/],
    [["--ipvs-exclude-cidrs=10.0.0.0"], /^--ipvs-exclude-cidrs: invalid CIDR "10.0.0.0"/],
    [["--ipvs-tcp-timeout=soon"], /^--ipvs-tcp-timeout: invalid duration "soon"/],
    [["--ipvs-sync-period=0"], /^--ipvs-sync-period: duration "0" must be positive/],
    [["--ipvs-strict-arp=maybe"], /^--ipvs-strict-arp: invalid boolean "maybe"/],
    [["--proxy-mode=nft"], /^--proxy-mode: invalid value "nft"/],
    [["--iptables-backend=xtables"], /^--iptables-backend: invalid value "xtables" \(auto, nft or legacy\)/],
    [["--master=ftp://x"], /^--master: invalid URL "ftp:\/\/x"/],
    [["--hostname-override=bad_name"], /^--hostname-override: invalid node name "bad_name"/],
    [["--bind-address=1.2.3"], /^--bind-address: invalid IP address "1.2.3"/],
    [["--cluster-cidr=10.0.0.0/40"], /^--cluster-cidr: invalid CIDR "10.0.0.0\/40"/],
    [["--nodeport-addresses=foo"], /^--nodeport-addresses: invalid CIDR "foo"/],
    [["--iptables-masquerade-bit=32"], /^--iptables-masquerade-bit: invalid value "32"/],
    [["--iptables-sync-period=10"], /^--iptables-sync-period: invalid duration "10"/],
    [["--iptables-sync-period=0"], /^--iptables-sync-period: duration "0" must be positive/],
    [["--iptables-min-sync-period=-1s"], /^--iptables-min-sync-period: invalid duration "-1s"/],
    [["--config-sync-period=forever"], /^--config-sync-period: invalid duration "forever"/],
    [["--iptables-min-sync-period=1m"], /must not exceed --iptables-sync-period/],
    [
      ["--healthz-bind-address=0.0.0.0"],
      /^--healthz-bind-address: invalid address "0.0.0.0" \(want IP:PORT\)/,
    ],
    [["--metrics-bind-address=localhost:80"], /^--metrics-bind-address: invalid address "localhost:80"/],
    [["--metrics-bind-address=1.2.3.4:70000"], /^--metrics-bind-address: invalid address/],
    [["--udp-timeout=0"], /^--udp-timeout: duration "0" must be positive/],
    [["--proxy-port-range=20-10"], /^--proxy-port-range: invalid value "20-10"/],
    [["--detect-local-mode=Bridge"], /^--detect-local-mode: invalid value "Bridge"/],
    [["--v=x"], /^--v: invalid value "x"/],
    [["--logging-format=xml"], /^--logging-format: invalid value "xml"/],
    [["--source=etcd"], /^--source: invalid value "etcd"/],
    [["--source=file:"], /^--source: invalid value "file:"/],
    [["--masquerade-all=yes"], /^--masquerade-all: invalid boolean "yes"/],
    [["--bogus"], /Unknown option '--bogus'/],
    [["--proxy-mode"], /--proxy-mode/],
    [["serve"], /^unknown command "serve"/],
    [["--config=/nope"], /^--config: cannot read "\/nope"/],
  ];
  for (const [argv, re] of cases) {
    const e = assertThrows(() => parseCommandLine(argv, noFile), UsageError);
    assertMatch(e.message, re, `${argv.join(" ")}: ${e.message}`);
  }
});

Deno.test("parseCommandLine: commands", () => {
  assertEquals(parseCommandLine(["--help"], noFile).command, "help");
  assertEquals(parseCommandLine(["--version"], noFile).command, "version");
  assertEquals(parseCommandLine(["--cleanup"], noFile).command, "cleanup");
  assertEquals(parseCommandLine(["render", "--source=file:x"], noFile).command, "render");
});

const CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: userspace
bindAddress: 127.0.0.1
clusterCIDR: 10.180.0.0/16
hostnameOverride: node-a
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig
iptables:
  masqueradeAll: true
  masqueradeBit: 13
  syncPeriod: 45s
  minSyncPeriod: 2s
nodePortAddresses: [192.168.0.0/24]
udpIdleTimeout: 500ms
portRange: 41000-41100
configSyncPeriod: 10m
logging:
  format: json
`;

Deno.test("--config maps a KubeProxyConfiguration and ignores other flags with a warning", () => {
  const { config, warnings } = parseCommandLine([
    "--config=/c.yaml",
    "--proxy-mode=iptables",
    "--udp-timeout=9s",
  ], () => CONFIG);
  assertEquals(config.mode, "userspace");
  assertEquals(config.kubeconfig, "/var/lib/kube-proxy/kubeconfig");
  assertEquals([config.masqueradeAll, config.masqueradeBit, config.syncPeriodMs, config.minSyncPeriodMs], [
    true,
    13,
    45_000,
    2000,
  ]);
  assertEquals([config.udpIdleTimeoutMs, config.configSyncPeriodMs, config.loggingFormat], [
    500,
    600_000,
    "json",
  ]);
  assertEquals(config.portRange, { min: 41000, max: 41100 });
  assertEquals(config.clusterCIDRs, ["10.180.0.0/16"]);
  assertEquals(warnings, ["--config is set: ignoring flags --proxy-mode, --udp-timeout"]);
});

Deno.test("--config errors name the file and the field", () => {
  const cases: Array<[string, RegExp]> = [
    ["kind: Foo\n", /^--config: \/c.yaml: want kind KubeProxyConfiguration/],
    ["a: [\n", /^--config: \/c.yaml:2: /],
    [CONFIG + "bogusField: 1\n", /^--config: \/c.yaml: bogusField: unknown field/],
    [
      CONFIG.replace("masqueradeBit: 13", "masqueradeBit: 40"),
      /^--config: \/c.yaml: iptables.masqueradeBit: invalid value "40"/,
    ],
    [
      CONFIG.replace("syncPeriod: 45s", "syncPeriod: soon"),
      /^--config: \/c.yaml: iptables.syncPeriod: invalid duration "soon"/,
    ],
    [CONFIG.replace("mode: userspace", "mode: magic"), /^--config: \/c.yaml: mode: invalid value "magic"/],
    [
      CONFIG.replace("masqueradeAll: true", "masqueradeAll: 1"),
      /^--config: \/c.yaml: iptables.masqueradeAll: want true or false/,
    ],
    [
      CONFIG.replace("bindAddress: 127.0.0.1", "bindAddress: 127.0.0"),
      /^--config: \/c.yaml: bindAddress: invalid IP address/,
    ],
    [
      CONFIG.replace("  kubeconfig:", "  kubeConfig:"),
      /^--config: \/c.yaml: clientConnection.kubeConfig: unknown field/,
    ],
  ];
  for (const [text, re] of cases) {
    const e = assertThrows(() => parseCommandLine(["--config=/c.yaml"], () => text), UsageError);
    assertMatch(e.message, re);
  }
});

Deno.test("--nodeport-addresses and nodePortAddresses accept primary beside CIDRs (normalised)", () => {
  const flags = parseCommandLine(["--nodeport-addresses=primary,10.1.2.3/8"]);
  assertEquals(flags.config.nodePortAddresses, ["primary", "10.0.0.0/8"]);
  const file = parseCommandLine(
    ["--config=kp.yaml"],
    () =>
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nnodePortAddresses: [primary]\n",
  );
  assertEquals(file.config.nodePortAddresses, ["primary"]);
  assertMatch(
    assertThrows(() => parseCommandLine(["--nodeport-addresses=secondary"]), UsageError).message,
    /invalid CIDR "secondary"/,
  );
});

Deno.test("KubeProxyConfiguration ipvs: section applies, its bad values name the field", () => {
  const file = (ipvs: string) => () =>
    `apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nipvs:\n${ipvs}`;
  const ok = parseCommandLine(
    ["--config=kp.yaml"],
    file(
      "  scheduler: lc\n  excludeCIDRs: [10.99.0.0/16]\n  strictARP: true\n  tcpTimeout: 1m\n  syncPeriod: 10s\n",
    ),
  );
  assertEquals([
    ok.config.mode,
    ok.config.ipvs.scheduler,
    ok.config.ipvs.excludeCIDRs,
    ok.config.ipvs.strictARP,
  ], [
    "ipvs",
    "lc",
    ["10.99.0.0/16"],
    true,
  ]);
  assertEquals([ok.config.ipvs.tcpTimeoutMs, ok.config.ipvs.syncPeriodMs], [60_000, 10_000]);
  assertMatch(
    assertThrows(() => parseCommandLine(["--config=kp.yaml"], file("  scheduler: fast\n")), UsageError)
      .message,
    /^--config: kp.yaml: ipvs.scheduler: invalid value "fast"/,
  );
  assertMatch(
    assertThrows(() => parseCommandLine(["--config=kp.yaml"], file("  udpTimeout: often\n")), UsageError)
      .message,
    /^--config: kp.yaml: ipvs.udpTimeout: invalid duration "often"/,
  );
});
