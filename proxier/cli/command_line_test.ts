import { load } from "js-yaml";
import { assert, assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import { UsageError } from "../runtime/errors.ts";
import type { ProxyConfig } from "../options/config.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";
import { parseCommandLine } from "./command_line.ts";
import { FLAGS } from "../options/flag_table.ts";
import { encodeConfig } from "../options/write_config.ts";

const noFile = (): string => {
  throw new Error("no such file");
};
const file = (text: string) => () => text;

/**
 * Every flag `kube-proxy --help` of upstream 1.37 lists on Linux (cmd/kube-proxy/app/options.go,
 * component-base's logging flags, cadvisor's two from Go's flag set), written out here rather than
 * read from the table under test.
 */
const UPSTREAM_FLAGS = [
  "bind-address",
  "bind-address-hard-fail",
  "boot-id-file",
  "cleanup",
  "cluster-cidr",
  "config",
  "config-sync-period",
  "conntrack-max-per-core",
  "conntrack-min",
  "conntrack-tcp-be-liberal",
  "conntrack-tcp-timeout-close-wait",
  "conntrack-tcp-timeout-established",
  "conntrack-udp-timeout",
  "conntrack-udp-timeout-stream",
  "detect-local-mode",
  "feature-gates",
  "healthz-bind-address",
  "healthz-port",
  "help",
  "hostname-override",
  "init-only",
  "iptables-localhost-nodeports",
  "iptables-masquerade-bit",
  "iptables-min-sync-period",
  "iptables-sync-period",
  "ipvs-exclude-cidrs",
  "ipvs-min-sync-period",
  "ipvs-scheduler",
  "ipvs-strict-arp",
  "ipvs-sync-period",
  "ipvs-tcp-timeout",
  "ipvs-tcpfin-timeout",
  "ipvs-udp-timeout",
  "kube-api-burst",
  "kube-api-content-type",
  "kube-api-qps",
  "kubeconfig",
  "log-flush-frequency",
  "log-json-info-buffer-size",
  "log-json-split-stream",
  "log-text-info-buffer-size",
  "log-text-split-stream",
  "logging-format",
  "machine-id-file",
  "masquerade-all",
  "master",
  "metrics-bind-address",
  "metrics-port",
  "nodeport-addresses",
  "oom-score-adj",
  "pod-bridge-interface",
  "pod-interface-name-prefix",
  "profiling",
  "proxy-mode",
  "show-hidden-metrics-for-version",
  "v",
  "version",
  "vmodule",
  "write-config-to",
];

/**
 * What `kube-proxy --write-config-to` writes with no other flag: upstream's v1alpha1 defaults after
 * its Linux platform defaults (the sync periods only in the running mode's section).
 */
const UPSTREAM_DEFAULTS = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 10
  contentType: application/vnd.kubernetes.protobuf
  kubeconfig: ""
  qps: 5
clusterCIDR: ""
configSyncPeriod: 15m0s
conntrack:
  maxPerCore: 32768
  min: 131072
  tcpBeLiberal: false
  tcpCloseWaitTimeout: 1h0m0s
  tcpEstablishedTimeout: 24h0m0s
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ClusterCIDR
enableProfiling: false
healthzBindAddress: 0.0.0.0:10256
hostnameOverride: ""
iptables:
  localhostNodePorts: true
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 1s
  syncPeriod: 30s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
kind: KubeProxyConfiguration
logging:
  flushFrequency: 5s
  format: text
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: 127.0.0.1:10249
mode: iptables
nftables:
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: -999
portRange: ""
showHiddenMetricsForVersion: ""
windowsRunAsService: false
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`;

/** The file `--write-config-to` would write for `argv`, parsed back. */
function written(argv: string[], read = noFile): Record<string, unknown> {
  const cmd = parseCommandLine([...argv, "--write-config-to=/out.yaml"], read);
  assertEquals(cmd.action, "write-config");
  return load(encodeConfig(cmd.facts.kubeProxyConfiguration)) as Record<string, unknown>;
}

/** `path` (dotted) of `o`. */
function at(o: unknown, path: string): unknown {
  return path.split(".").reduce((x, k) => (x as Record<string, unknown>)?.[k], o);
}

Deno.test("flags: every upstream 1.37 flag exists here as upstream's, and no other claims to be upstream's", () => {
  const ours = FLAGS.filter((f) => f.origin === "upstream").map((f) => f.name).sort();
  assertEquals(ours, [...UPSTREAM_FLAGS].sort());
});

Deno.test("flags: no flag gives upstream's defaults, as --write-config-to writes them", () => {
  assertEquals(written([]), load(UPSTREAM_DEFAULTS));
  const { config } = parseCommandLine([], noFile);
  assertEquals(config, defaultConfig());
  assertEquals(
    [config.syncPeriodMs, config.minSyncPeriodMs, config.configSyncPeriodMs, config.oomScoreAdj],
    [30_000, 1000, 900_000, -999],
  );
  assertEquals(config.healthzBindAddress, { hostname: "0.0.0.0", port: 10256 });
  assertEquals(config.metricsBindAddress, { hostname: "127.0.0.1", port: 10249 });
});

/** A value for each upstream flag that sets a file field, and the field's value afterwards. */
const FLAG_CASES: Array<[string, string, string, unknown]> = [
  ["bind-address", "10.0.0.5", "bindAddress", "10.0.0.5"],
  ["bind-address-hard-fail", "true", "bindAddressHardFail", true],
  ["cluster-cidr", "10.244.0.0/16,fd00:10:244::/56", "clusterCIDR", "10.244.0.0/16,fd00:10:244::/56"],
  ["config-sync-period", "5m", "configSyncPeriod", "5m0s"],
  ["conntrack-max-per-core", "0", "conntrack.maxPerCore", 0],
  ["conntrack-min", "65536", "conntrack.min", 65536],
  ["conntrack-tcp-be-liberal", "true", "conntrack.tcpBeLiberal", true],
  ["conntrack-tcp-timeout-close-wait", "0s", "conntrack.tcpCloseWaitTimeout", "0s"],
  ["conntrack-tcp-timeout-established", "2h", "conntrack.tcpEstablishedTimeout", "2h0m0s"],
  ["conntrack-udp-timeout", "30s", "conntrack.udpTimeout", "30s"],
  ["conntrack-udp-timeout-stream", "2m", "conntrack.udpStreamTimeout", "2m0s"],
  ["detect-local-mode", "NodeCIDR", "detectLocalMode", "NodeCIDR"],
  ["feature-gates", "KubeProxyNFTablesLocalhostNodePorts=true,AllBeta=false", "featureGates", {
    KubeProxyNFTablesLocalhostNodePorts: true,
    AllBeta: false,
  }],
  ["healthz-bind-address", "127.0.0.1:9999", "healthzBindAddress", "127.0.0.1:9999"],
  ["iptables-localhost-nodeports", "false", "iptables.localhostNodePorts", false],
  ["iptables-masquerade-bit", "13", "iptables.masqueradeBit", 13],
  ["iptables-min-sync-period", "2s", "iptables.minSyncPeriod", "2s"],
  ["iptables-sync-period", "1m", "iptables.syncPeriod", "1m0s"],
  ["ipvs-exclude-cidrs", "10.99.0.0/16", "ipvs.excludeCIDRs", ["10.99.0.0/16"]],
  ["ipvs-scheduler", "lc", "ipvs.scheduler", "lc"],
  ["ipvs-strict-arp", "true", "ipvs.strictARP", true],
  ["ipvs-tcp-timeout", "900s", "ipvs.tcpTimeout", "15m0s"],
  ["ipvs-tcpfin-timeout", "2m", "ipvs.tcpFinTimeout", "2m0s"],
  ["ipvs-udp-timeout", "5m", "ipvs.udpTimeout", "5m0s"],
  ["kube-api-burst", "20", "clientConnection.burst", 20],
  ["kube-api-content-type", "application/json", "clientConnection.contentType", "application/json"],
  ["kube-api-qps", "7.5", "clientConnection.qps", 7.5],
  ["kubeconfig", "/etc/kubernetes/proxy.conf", "clientConnection.kubeconfig", "/etc/kubernetes/proxy.conf"],
  ["log-flush-frequency", "10s", "logging.flushFrequency", "10s"],
  ["log-json-info-buffer-size", "1Mi", "logging.options.json.infoBufferSize", "1Mi"],
  ["log-json-split-stream", "true", "logging.options.json.splitStream", true],
  ["log-text-info-buffer-size", "64Ki", "logging.options.text.infoBufferSize", "64Ki"],
  ["log-text-split-stream", "true", "logging.options.text.splitStream", true],
  ["logging-format", "json", "logging.format", "json"],
  ["masquerade-all", "true", "iptables.masqueradeAll", true],
  ["metrics-bind-address", "0.0.0.0:10249", "metricsBindAddress", "0.0.0.0:10249"],
  ["nodeport-addresses", "192.168.0.0/24", "nodePortAddresses", ["192.168.0.0/24"]],
  ["oom-score-adj", "-500", "oomScoreAdj", -500],
  ["pod-bridge-interface", "cbr0", "detectLocal.bridgeInterface", "cbr0"],
  ["pod-interface-name-prefix", "veth", "detectLocal.interfaceNamePrefix", "veth"],
  ["profiling", "true", "enableProfiling", true],
  ["proxy-mode", "nftables", "mode", "nftables"],
  ["show-hidden-metrics-for-version", "1.36", "showHiddenMetricsForVersion", "1.36"],
  ["v", "3", "logging.verbosity", 3],
  ["vmodule", "proxier*=5", "logging.vmodule", [{ filePattern: "proxier*", verbosity: 5 }]],
];

Deno.test("flags: each upstream flag sets upstream's field, as --write-config-to shows", () => {
  const defaults = load(UPSTREAM_DEFAULTS);
  for (const [flag, value, field, want] of FLAG_CASES) {
    const out = written([`--${flag}=${value}`]);
    assertEquals(at(out, field), want, `--${flag}=${value}`);
    // Nothing else changed (but the mode's own section, and the primary NodePorts nftables implies).
    for (const [k, v] of Object.entries(defaults as Record<string, unknown>)) {
      if (field.split(".")[0] === k || ["iptables", "nftables", "ipvs", "nodePortAddresses"].includes(k)) {
        continue;
      }
      assertEquals(out[k], v, `--${flag}: ${k}`);
    }
  }
  // The flags without a field of their own: process and deprecated ones.
  const covered = new Set(FLAG_CASES.map(([f]) => f));
  const rest = UPSTREAM_FLAGS.filter((f) => !covered.has(f)).sort();
  assertEquals(rest, [
    "boot-id-file",
    "cleanup",
    "config",
    "healthz-port",
    "help",
    "hostname-override",
    "init-only",
    "ipvs-min-sync-period",
    "ipvs-sync-period",
    "machine-id-file",
    "master",
    "metrics-port",
    "version",
    "write-config-to",
  ]);
});

Deno.test("flags: the rest parse with upstream's meaning", () => {
  const p = (...argv: string[]) => parseCommandLine(argv, noFile);
  assertEquals(p("--cleanup").query, { cleanup: true, initOnly: false, takeOver: false });
  assertEquals(p("--init-only").query, { cleanup: false, initOnly: true, takeOver: false });
  assertEquals(p("--take-over").query, { cleanup: false, initOnly: false, takeOver: true });
  assertEquals(p("--help").action, "help");
  assertEquals(p("-h").action, "help");
  assertEquals(p("--version").action, "version");
  assertEquals(p("--version=raw").action, "version");
  assertEquals(p("--hostname-override", " Node-A ").config.hostnameOverride, "node-a");
  assertEquals(p("--master=https://10.0.0.1:6443").config.master, "https://10.0.0.1:6443");
  // ipvs periods apply in ipvs mode only; every mode starts from iptables' defaulted periods.
  const ipvs = p(
    "--proxy-mode=ipvs",
    "--ipvs-sync-period=45s",
    "--ipvs-min-sync-period=2s",
    "--iptables-sync-period=9s",
  );
  assertEquals([ipvs.config.syncPeriodMs, ipvs.config.minSyncPeriodMs], [45_000, 2000]);
  assertEquals([p("--proxy-mode=ipvs").config.minSyncPeriodMs], [1000]);
  const ipt = p("--ipvs-sync-period=45s", "--iptables-sync-period=9s");
  assertEquals(ipt.config.syncPeriodMs, 9000);
  const nft = p(
    "--proxy-mode=nftables",
    "--iptables-sync-period=9s",
    "--masquerade-all",
    "--iptables-masquerade-bit=3",
  );
  assertEquals([nft.config.syncPeriodMs, nft.config.masqueradeAll], [9000, true]);
  // --iptables-masquerade-bit is the iptables (and ipvs) mark; nftables keeps its own, as upstream.
  assertEquals([nft.config.masqueradeBit, nft.config.nftablesMasqueradeBit], [3, 14]);
  assertEquals(nft.config.nodePortAddresses, ["primary"]);
  // Upstream 1.37: the keywords combine with each other and with CIDRs (a CIDR used as its network).
  assertEquals(
    p("--proxy-mode=nftables", "--nodeport-addresses=primary,localhost,10.1.2.3/8,all").config
      .nodePortAddresses,
    ["primary", "localhost", "10.0.0.0/8", "all"],
  );
  // The deprecated ports join an address given as an IP alone; 0 disables.
  assertEquals(p("--healthz-bind-address=127.0.0.1", "--healthz-port=9000").config.healthzBindAddress, {
    hostname: "127.0.0.1",
    port: 9000,
  });
  assertEquals(p("--healthz-port=0").config.healthzBindAddress, undefined);
  assertEquals(p("--metrics-port=0").config.metricsBindAddress, undefined);
  assertMatch(p("--healthz-port=9000").warnings.join(), /--healthz-port has been deprecated/);
  const named = p("--boot-id-file=/x", "--machine-id-file=/y", "--profiling").facts.notApplying;
  assertEquals(named.length, 3);
  assertMatch(named.join("\n"), /--boot-id-file does not apply/);
  assertMatch(named.join("\n"), /--machine-id-file does not apply/);
  assertMatch(named.join("\n"), /profiling .* does not apply/);
});

Deno.test("flags: pflag's spellings: -v=2, -v 2, -v2, underscores, --flag value, repeated lists", () => {
  const v = (...argv: string[]) => parseCommandLine(argv, noFile).config.logging.verbosity;
  assertEquals([v("-v=2"), v("-v", "3"), v("-v4"), v("--v=5"), v("--v", "6")], [2, 3, 4, 5, 6]);
  const c = parseCommandLine(
    [
      "--conntrack_max_per_core",
      "0",
      "--nodeport-addresses=10.0.0.0/8",
      "--nodeport-addresses",
      "192.168.0.0/16",
    ],
    noFile,
  ).config;
  assertEquals(c.conntrack.maxPerCore, 0);
  assertEquals(c.nodePortAddresses, ["10.0.0.0/8", "192.168.0.0/16"]);
  assertEquals(parseCommandLine(["--masquerade-all=t"], noFile).config.masqueradeAll, true);
  assertEquals(
    parseCommandLine(["--feature-gates=AllAlpha=true", "--feature-gates=AllBeta=false"], noFile)
      .facts.kubeProxyConfiguration.featureGates,
    {
      AllAlpha: true,
      AllBeta: false,
    },
  );
});

Deno.test("flags: k3s's kube-proxy command line starts, with upstream's meaning", () => {
  // As k3s starts kube-proxy (its agent's flags, 1.3x).
  const { action, named, config } = parseCommandLine([
    "--cluster-cidr=10.42.0.0/16",
    "--conntrack-max-per-core=0",
    "--conntrack-tcp-timeout-close-wait=0s",
    "--conntrack-tcp-timeout-established=0s",
    "--healthz-bind-address=127.0.0.1",
    "--hostname-override=k3s-node-1",
    "--kubeconfig=/var/lib/rancher/k3s/agent/kubeproxy.kubeconfig",
    "--proxy-mode=iptables",
  ], noFile);
  assertEquals([action, named], ["run", false]);
  const want: ProxyConfig = {
    ...defaultConfig(),
    clusterCIDRs: ["10.42.0.0/16"],
    hostnameOverride: "k3s-node-1",
    kubeconfig: "/var/lib/rancher/k3s/agent/kubeproxy.kubeconfig",
    healthzBindAddress: { hostname: "127.0.0.1", port: 10256 },
    conntrack: {
      ...defaultConfig().conntrack,
      maxPerCore: 0,
      tcpCloseWaitTimeoutMs: 0,
      tcpEstablishedTimeoutMs: 0,
    },
  };
  assertEquals(config, want);
});

Deno.test("flags: each bad value names the flag and the value; exit-2 errors keep upstream's messages", () => {
  const cases: Array<[string[], RegExp]> = [
    [["--ipvs-scheduler=fast"], /^--ipvs-scheduler: Invalid value: "fast": must be one of rr, wrr/],
    [
      ["--proxy-mode=ipvs", "--ipvs-exclude-cidrs=10.0.0.0"],
      /^--ipvs-exclude-cidrs: Invalid value: "10.0.0.0": must be a valid CIDR/,
    ],
    [["--ipvs-tcp-timeout=soon"], /^--ipvs-tcp-timeout: invalid duration "soon"/],
    [
      ["--proxy-mode=ipvs", "--ipvs-sync-period=0"],
      /^--ipvs-sync-period: Invalid value: "0s": must be greater than 0/,
    ],
    [["--ipvs-strict-arp=maybe"], /^--ipvs-strict-arp: invalid boolean "maybe"/],
    [
      ["--proxy-mode=nft"],
      /^--proxy-mode: Invalid value: "nft": must be iptables, ipvs, nftables, userspace or blank/,
    ],
    [["--proxy-mode=kernelspace"], /^--proxy-mode: Invalid value: "kernelspace"/],
    [["--iptables-backend=xtables"], /^--iptables-backend: invalid value "xtables" \(auto, nft or legacy\)/],
    [["--master=ftp://x"], /^--master: invalid URL "ftp:\/\/x"/],
    [["--hostname-override=bad_name"], /^--hostname-override: invalid node name "bad_name"/],
    [["--hostname-override=  "], /^--hostname-override: empty hostname-override is invalid/],
    [["--bind-address=1.2.3"], /^--bind-address: invalid IP address "1.2.3"/],
    [
      ["--cluster-cidr=10.0.0.0/40"],
      /^--cluster-cidr: Invalid value: "10.0.0.0\/40": must be a valid CIDR block/,
    ],
    [["--cluster-cidr=10.0.0.0/8,10.1.0.0/16"], /^--cluster-cidr: Invalid value: .*dual-stack pair/],
    [
      ["--nodeport-addresses=foo"],
      /^--nodeport-addresses: Invalid value: "foo": must be a valid CIDR or one of 'primary', 'localhost', 'all'/,
    ],
    [
      ["--nodeport-addresses=primary,loopback"],
      /^--nodeport-addresses: Invalid value: "loopback": must be a valid CIDR or one of/,
    ],
    [
      ["--iptables-masquerade-bit=32"],
      /^--iptables-masquerade-bit: Invalid value: 32: must be within the range \[0, 31\]/,
    ],
    [["--iptables-sync-period=10"], /^--iptables-sync-period: invalid duration "10"/],
    [["--iptables-sync-period=0"], /^--iptables-sync-period: Invalid value: "0s": must be greater than 0/],
    [
      ["--iptables-min-sync-period=-1s"],
      /^--iptables-min-sync-period: Invalid value: "-1s": must be greater than or equal to 0/,
    ],
    [
      ["--iptables-min-sync-period=1m"],
      /^--iptables-sync-period: Invalid value: "1m0s": must be greater than or equal to iptables.minSyncPeriod/,
    ],
    [["--config-sync-period=0"], /^--config-sync-period: Invalid value: "0s": must be greater than 0/],
    [["--config-sync-period=forever"], /^--config-sync-period: invalid duration "forever"/],
    [
      ["--healthz-bind-address=localhost"],
      /^--healthz-bind-address: invalid address "localhost" \(want IP or IP:PORT\)/,
    ],
    [
      ["--metrics-bind-address=1.2.3.4:70000"],
      /^--metrics-bind-address: Invalid value: "70000": must be a valid port/,
    ],
    [["--udp-timeout=0"], /^--udp-timeout: Invalid value: "0s": must be greater than 0/],
    [["--proxy-port-range=20-10"], /^--proxy-port-range: invalid value "20-10"/],
    [
      ["--detect-local-mode=Bridge"],
      /^--detect-local-mode: Unsupported value: "Bridge": supported values: "ClusterCIDR"/,
    ],
    [
      ["--detect-local-mode=BridgeInterface"],
      /^--pod-bridge-interface: Invalid value: "": must not be empty/,
    ],
    [
      ["--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth+"],
      /^--pod-interface-name-prefix: Invalid value: "veth\+": must be an interface name/,
    ],
    [
      ["--detect-local-mode=BridgeInterface", "--pod-bridge-interface=br0;drop"],
      /^--pod-bridge-interface: Invalid value: "br0;drop"/,
    ],
    [
      ["--oom-score-adj=-1001"],
      /^--oom-score-adj: Invalid value: -1001: must be within the range \[-1000, 1000\]/,
    ],
    [
      ["--conntrack-max-per-core=-1"],
      /^--conntrack-max-per-core: Invalid value: -1: must be greater than or equal to 0/,
    ],
    [["--conntrack-min=x"], /^--conntrack-min: invalid value "x" \(an integer/],
    [
      ["--conntrack-udp-timeout=-1s"],
      /^--conntrack-udp-timeout: Invalid value: "-1s": must be greater than or equal to 0/,
    ],
    [["--kube-api-burst=-1"], /^--kube-api-burst: Invalid value: -1: must be greater than or equal to 0/],
    [["--kube-api-qps=fast"], /^--kube-api-qps: invalid value "fast" \(a number\)/],
    [["--feature-gates=Foo"], /^--feature-gates: missing bool value for Foo/],
    [["--feature-gates=Foo=maybe"], /^--feature-gates: Foo: invalid boolean "maybe"/],
    [
      ["--show-hidden-metrics-for-version=1.30"],
      /^--show-hidden-metrics-for-version: Invalid value: "1.30": --show-hidden-metrics-for-version must be omitted or have the value '1.36'/,
    ],
    [
      ["--logging-format=xml"],
      /^--logging-format: Unsupported value: "xml": supported values: "json", "text"/,
    ],
    [["--logging-format=json", "--vmodule=a=1"], /^--vmodule: Forbidden: Only supported for text log format/],
    [["--vmodule=a"], /^--vmodule: invalid entry "a" \(want pattern=N\)/],
    [["-v=x"], /^--v: invalid value "x"/],
    [["--log-text-info-buffer-size=lots"], /^--log-text-info-buffer-size: invalid quantity "lots"/],
    [["--source=etcd"], /^--source: invalid value "etcd"/],
    [["--source=file:"], /^--source: invalid value "file:"/],
    [["--masquerade-all=yes"], /^--masquerade-all: invalid boolean "yes"/],
    [["--bogus"], /^unknown flag: --bogus/],
    [["-x"], /^unknown shorthand flag: 'x' in -x/],
    [["--proxy-mode"], /^--proxy-mode: flag needs an argument/],
    [["serve"], /^unknown command "serve"/],
    [["--dst=1.2.3.4"], /^--dst: only the trace command takes it/],
    [["--config=/nope"], /^--config: cannot read "\/nope"/],
    [
      ["--maglev-table-size=1000"],
      /^--maglev-table-size: Invalid value: 1000: must be a prime within the range \[251, 131071\]/,
    ],
    [["--maglev-table-size=131101"], /^--maglev-table-size: Invalid value: 131101: must be a prime/],
    [["--maglev-seed=-1"], /^--maglev-seed: invalid value "-1" \(an integer from 0 to 2147483647\)/],
  ];
  for (const [argv, re] of cases) {
    const e = assertThrows(() => parseCommandLine(argv, noFile), UsageError);
    assertMatch(e.message, re, `${argv.join(" ")}: ${e.message}`);
  }
});

/** kubeadm's kube-proxy ConfigMap `config.conf` (1.3x): every field, most at zero, null or "". */
const KUBEADM = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
kind: KubeProxyConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: ""
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
futureField: 7
`;

/** EKS's kube-proxy-config (real values, a field upstream 1.36 no longer has, its own OOM score). */
const EKS = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
clientConnection:
  acceptContentTypes: ""
  burst: 10
  contentType: application/vnd.kubernetes.protobuf
  kubeconfig: /var/lib/kube-proxy/kubeconfig
  qps: 5
clusterCIDR: ""
configSyncPeriod: 15m0s
conntrack:
  maxPerCore: 32768
  min: 131072
  tcpCloseWaitTimeout: 1h0m0s
  tcpEstablishedTimeout: 24h0m0s
enableProfiling: false
healthzBindAddress: 0.0.0.0:10256
hostnameOverride: ""
iptables:
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 0s
  syncPeriod: 30s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  syncPeriod: 30s
kind: KubeProxyConfiguration
metricsBindAddress: 0.0.0.0:10249
mode: "iptables"
nodePortAddresses: null
oomScoreAdj: -998
portRange: ""
udpIdleTimeout: 250ms
`;

Deno.test("config: kubeadm's file (zeros, nulls, empty strings, a field this version does not know) starts with upstream's defaults", () => {
  const cmd = parseCommandLine(
    ["--config=/var/lib/kube-proxy/config.conf", "--hostname-override=node-1"],
    file(KUBEADM),
  );
  assertEquals([cmd.action, cmd.named], ["run", false]);
  assertEquals(cmd.config, {
    ...defaultConfig(),
    kubeconfig: "/var/lib/kube-proxy/kubeconfig.conf",
    clusterCIDRs: ["10.244.0.0/16"],
    hostnameOverride: "node-1",
  });
  assertEquals(cmd.warnings, [
    '--config: /var/lib/kube-proxy/config.conf: unknown field "futureField" (not a field of KubeProxyConfiguration kubeproxy.config.k8s.io/v1alpha1); ignored, as upstream\'s lenient decoding does',
  ]);
  // `mode: ""` is the default, which upstream 1.37 warns will change (the proxy says so at start).
  assertEquals(cmd.facts.modeChosen, false);
  assertEquals(cmd.facts.notApplying, []);
  // The same file in nftables mode: its section's zero periods default too, NodePorts on primary.
  const nft = parseCommandLine(["--config=c"], file(KUBEADM.replace('mode: ""', "mode: nftables"))).config;
  assertEquals([nft.mode, nft.syncPeriodMs, nft.minSyncPeriodMs, nft.nodePortAddresses], [
    "nftables",
    30_000,
    1000,
    ["primary"],
  ]);
  // ipvs: upstream defaults its sync period but not its minimum.
  const ipvs = parseCommandLine(["--config=c"], file(KUBEADM.replace('mode: ""', "mode: ipvs"))).config;
  assertEquals([ipvs.syncPeriodMs, ipvs.minSyncPeriodMs, ipvs.ipvs.scheduler], [30_000, 0, "rr"]);
});

Deno.test("config: EKS's file starts; its values take effect", () => {
  const cmd = parseCommandLine(["--config=/var/lib/kube-proxy-config/config"], file(EKS));
  assertEquals(cmd.config, {
    ...defaultConfig(),
    kubeconfig: "/var/lib/kube-proxy/kubeconfig",
    metricsBindAddress: { hostname: "0.0.0.0", port: 10249 },
    oomScoreAdj: -998,
  });
  assertEquals(cmd.warnings, []);
});

Deno.test("config: what --write-config-to writes reads back to the same configuration", () => {
  for (
    const argv of [
      [],
      ["--proxy-mode=ipvs", "--ipvs-sync-period=10s", "--conntrack-tcp-be-liberal", "--masquerade-all"],
      [
        "--proxy-mode=nftables",
        "--cluster-cidr=10.0.0.0/8",
        "--detect-local-mode=InterfaceNamePrefix",
        "--pod-interface-name-prefix=veth",
      ],
      ["--proxy-mode=userspace", "--udp-timeout=1s", "--tcp-idle-timeout=0", "--userspace-tcp-workers=3"],
      ["--proxy-mode=nftables", "--maglev-table-size=1021", "--maglev-seed=7"],
    ]
  ) {
    const first = parseCommandLine(argv, noFile);
    const text = encodeConfig(first.facts.kubeProxyConfiguration);
    const again = parseCommandLine(["--config=w.yaml"], file(text));
    assertEquals(again.config, first.config, argv.join(" "));
    assertEquals(again.warnings, [], argv.join(" "));
  }
  // Our own fields appear only when not at their defaults: a default file is upstream's.
  assert(!encodeConfig(parseCommandLine([], noFile).facts.kubeProxyConfiguration).includes("udpIdleTimeout"));
});

Deno.test("config: with --config, other proxy flags are ignored (named once); logging, hostname and master flags apply", () => {
  const cmd = parseCommandLine(
    [
      "--config=/c.yaml",
      "--proxy-mode=ipvs",
      "--udp-timeout=9s",
      "-v=4",
      "--logging-format=json",
      "--master=http://10.0.0.1:8080",
    ],
    file(
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nlogging:\n  verbosity: 2\n",
    ),
  );
  assertEquals(cmd.config.mode, "iptables");
  assertEquals(cmd.config.udpIdleTimeoutMs, 250);
  assertEquals([cmd.config.logging.verbosity, cmd.config.logging.format, cmd.config.master], [
    4,
    "json",
    "http://10.0.0.1:8080",
  ]);
  assertEquals(cmd.warnings, ["--config is set: ignoring flags --proxy-mode, --udp-timeout"]);
  assertEquals(cmd.facts.modeChosen, false);
  // A mode given by flag is chosen; render and trace warn of nothing.
  assertEquals(parseCommandLine(["--proxy-mode=iptables"], noFile).facts.modeChosen, true);
  for (const args of [["--proxy-mode=iptables"], ["render"], ["trace", "--dst=10.0.0.1", "--dport=80"]]) {
    assertEquals(parseCommandLine(args, noFile).warnings, [], args.join(" "));
  }
});

Deno.test("config: every field takes effect, or is named at start as not applying", () => {
  const cmd = parseCommandLine(
    ["--config=c"],
    file(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
featureGates: {NFTablesProxyMode: true}
enableProfiling: true
showHiddenMetricsForVersion: "1.36"
winkernel: {networkName: flannel}
logging:
  vmodule: [{filePattern: "proxier*", verbosity: 4}]
  options: {json: {splitStream: true, infoBufferSize: 1Mi}}
bindAddressHardFail: true
oomScoreAdj: -100
conntrack: {tcpBeLiberal: true, udpTimeout: 30s, udpStreamTimeout: 2m}
clientConnection: {qps: 50, burst: 100, contentType: application/json}
detectLocalMode: BridgeInterface
detectLocal: {bridgeInterface: cbr0}
`),
  );
  const c = cmd.config;
  assertEquals([c.bindAddressHardFail, c.oomScoreAdj], [true, -100]);
  assertEquals([c.conntrack.tcpBeLiberal, c.conntrack.udpTimeoutMs, c.conntrack.udpStreamTimeoutMs], [
    true,
    30_000,
    120_000,
  ]);
  assertEquals(c.clientConnection, {
    acceptContentTypes: "",
    contentType: "application/json",
    qps: 50,
    burst: 100,
  });
  assertEquals([c.detectLocalMode, c.detectLocal.bridgeInterface], ["BridgeInterface", "cbr0"]);
  const notes = cmd.facts.notApplying.join("\n");
  for (
    const re of [
      /profiling .* does not apply/,
      /featureGates NFTablesProxyMode=true do not apply/,
      /showHiddenMetricsForVersion does not apply/,
      /winkernel and windowsRunAsService are Windows-only/,
      /logging.vmodule .* does not apply/,
      /split streams .* do not apply/,
      /info buffer sizes .* do not apply/,
    ]
  ) assertMatch(notes, re);
  assertEquals(cmd.facts.notApplying.length, 7);
});

Deno.test("config: errors name the file and the field, with upstream's messages", () => {
  const base = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";
  const cases: Array<[string, RegExp]> = [
    ["kind: Foo\n", /^--config: \/c.yaml: want kind KubeProxyConfiguration/],
    ["a: [\n", /^--config: \/c.yaml:2: /],
    [
      base + "iptables:\n  masqueradeBit: 40\n",
      /^--config: \/c.yaml: iptables.masqueradeBit: Invalid value: 40: must be within the range \[0, 31\]/,
    ],
    [
      base + "iptables:\n  syncPeriod: soon\n",
      /^--config: \/c.yaml: iptables.syncPeriod: invalid duration "soon"/,
    ],
    [
      base + "iptables:\n  syncPeriod: 30\n",
      /^--config: \/c.yaml: iptables.syncPeriod: want a duration string such as "30s", got 30/,
    ],
    [
      base + "iptables:\n  syncPeriod: -1s\n",
      /^--config: \/c.yaml: iptables.syncPeriod: Invalid value: "-1s": must be greater than 0/,
    ],
    [base + "mode: magic\n", /^--config: \/c.yaml: mode: Invalid value: "magic"/],
    [
      base + "iptables:\n  masqueradeAll: 1\n",
      /^--config: \/c.yaml: iptables.masqueradeAll: want true or false, got 1/,
    ],
    [base + "iptables: []\n", /^--config: \/c.yaml: iptables: want a mapping/],
    [
      base + "bindAddress: 127.0.0\n",
      /^--config: \/c.yaml: bindAddress: Invalid value: "127.0.0": not a valid textual representation of an IP address/,
    ],
    [
      base + 'conntrack:\n  maxPerCore: "32768"\n',
      /^--config: \/c.yaml: conntrack.maxPerCore: want an integer/,
    ],
    [
      base + "oomScoreAdj: 2000\n",
      /^--config: \/c.yaml: oomScoreAdj: Invalid value: 2000: must be within the range/,
    ],
    [
      base + "featureGates: {A: yes please}\n",
      /^--config: \/c.yaml: featureGates: want a mapping of names to true or false/,
    ],
    [base + "hostnameOverride: Bad_Name\n", /^--config: \/c.yaml: hostnameOverride: invalid node name/],
    [
      base + "metricsBindAddress: localhost:10249\n",
      /^--config: \/c.yaml: metricsBindAddress: Invalid value: "localhost": must be a valid IP/,
    ],
  ];
  for (const [text, re] of cases) {
    const e = assertThrows(() => parseCommandLine(["--config=/c.yaml"], file(text)), UsageError);
    assertMatch(e.message, re, text);
  }
  // A misspelt field is a warning (lenient decoding), and its value is not used.
  const lenient = parseCommandLine(
    ["--config=/c.yaml"],
    file(base + "clientConnection:\n  kubeConfig: /x\n"),
  );
  assertEquals(lenient.config.kubeconfig, "");
  assertMatch(lenient.warnings[0], /unknown field "clientConnection.kubeConfig"/);
});

Deno.test("config: an address without a port takes the default port; an IPv6 bindAddress moves the defaults to ::", () => {
  const base = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";
  const c = parseCommandLine(
    ["--config=c"],
    file(base + "healthzBindAddress: 127.0.0.1\nmetricsBindAddress: '::1'\n"),
  ).config;
  assertEquals([c.healthzBindAddress, c.metricsBindAddress], [
    { hostname: "127.0.0.1", port: 10256 },
    { hostname: "::1", port: 10249 },
  ]);
  const v6 = parseCommandLine(["--config=c"], file(base + "bindAddress: 'fd00::1'\n")).config;
  assertEquals([v6.healthzBindAddress, v6.metricsBindAddress], [
    { hostname: "::", port: 10256 },
    { hostname: "::1", port: 10249 },
  ]);
});

Deno.test("the shipped example configuration decodes without a warning, to upstream's defaults", () => {
  const text = Deno.readTextFileSync(new URL("../../deploy/kube-proxy-config.yaml", import.meta.url));
  const cmd = parseCommandLine(["--config=deploy/kube-proxy-config.yaml"], file(text));
  assertEquals(cmd.warnings, []);
  assertEquals(cmd.config, {
    ...defaultConfig(),
    kubeconfig: "/var/lib/kube-proxy/kubeconfig.conf",
    clusterCIDRs: ["10.244.0.0/16"],
  });
});
