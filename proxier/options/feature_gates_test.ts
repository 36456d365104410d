import { assertEquals, assertThrows } from "../../tests/support/assert.ts";

/** The message `fn` throws. */
const thrown = (fn: () => unknown) => assertThrows(fn, Error).message;
import {
  ALLOW_SERVICE_EXTERNAL_IPS,
  FeatureGates,
  KNOWN_FEATURES,
  KUBE_PROXY_IPVS,
  KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS,
} from "./feature_gates.ts";
import { parseCommandLine } from "../cli/command_line.ts";

Deno.test("feature gates: upstream 1.37's defaults and stages for the gates this program acts on", () => {
  const g = new FeatureGates();
  assertEquals(g.enabled(ALLOW_SERVICE_EXTERNAL_IPS), true);
  assertEquals(g.enabled(KUBE_PROXY_IPVS), true);
  assertEquals(g.enabled(KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS), false);
  const stage = (n: string) => g.all().find((x) => x.name === n)?.stage;
  assertEquals(
    [
      stage(ALLOW_SERVICE_EXTERNAL_IPS),
      stage(KUBE_PROXY_IPVS),
      stage(KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS),
    ],
    // AllowServiceExternalIPs is GA in upstream's spec (default true, to turn false in 1.40).
    ["", "DEPRECATED", "ALPHA"],
  );
  // GA is labelled "" in kubernetes_feature_enabled, as upstream's PreRelease GA.
  assertEquals(stage("NFTablesProxyMode"), "");
  assertEquals(g.all().length, KNOWN_FEATURES.size);
});

Deno.test("feature gates: unknown and locked gates are refused with upstream's messages", () => {
  assertEquals(thrown(() => new FeatureGates({ Bogus: true })), "unrecognized feature gate: Bogus");
  assertEquals(
    thrown(() => new FeatureGates({ NFTablesProxyMode: false })),
    "cannot set feature gate NFTablesProxyMode to false, feature is locked to true",
  );
  // Locked to its default, a GA gate may still be set to it (with upstream's warning).
  assertEquals(new FeatureGates({ NFTablesProxyMode: true }).warnings, [
    "Setting GA feature gate NFTablesProxyMode=true. It will be removed in a future release.",
  ]);
  assertEquals(new FeatureGates({ [KUBE_PROXY_IPVS]: false }).warnings, [
    "Setting deprecated feature gate KubeProxyIPVS=false. It will be removed in a future release.",
  ]);
  // A GA gate upstream leaves settable for a release, and a deprecated one it has locked.
  assertEquals(new FeatureGates({ SELinuxMount: false }).enabled("SELinuxMount"), false);
  assertEquals(
    thrown(() => new FeatureGates({ DisableNodeKubeProxyVersion: false })),
    "cannot set feature gate DisableNodeKubeProxyVersion to false, feature is locked to true",
  );
});

Deno.test("feature gates: 1.37's own gates are known and the ones it removed are not", () => {
  // The opt-out of upstream's netlink listing: this program lists through nft either way.
  const g = new FeatureGates({
    NFTablesNetlink: false,
    WatchListCompression: false,
    EvictionRequestAPI: true,
  });
  assertEquals(g.enabled("NFTablesNetlink"), false);
  assertEquals(new FeatureGates().enabled("NFTablesNetlink"), true);
  assertEquals(g.warnings, []);
  // Locked at 1.37, and removed from it.
  assertEquals(
    thrown(() => new FeatureGates({ ExecProbeTimeout: false })),
    "cannot set feature gate ExecProbeTimeout to false, feature is locked to true",
  );
  for (const removed of ["SidecarContainers", "APIServerTracing", "StrictCostEnforcementForVAP"]) {
    assertEquals(
      thrown(() => new FeatureGates({ [removed]: true })),
      `unrecognized feature gate: ${removed}`,
    );
  }
});

Deno.test("feature gates: AllAlpha and AllBeta set every alpha or beta gate not named", () => {
  const g = new FeatureGates({ AllAlpha: true, AllBeta: false, DRAConsumableCapacity: true });
  assertEquals(g.enabled(KUBE_PROXY_NFTABLES_LOCALHOST_NODEPORTS), true);
  assertEquals(g.enabled("ContextualLogging"), false, "a beta gate follows AllBeta");
  assertEquals(g.enabled("DRAConsumableCapacity"), true, "a gate set by name keeps its value");
  assertEquals(g.enabled(ALLOW_SERVICE_EXTERNAL_IPS), true, "a deprecated gate follows neither");
});

Deno.test("feature gates: a bad gate on the command line or in --config is a usage error naming where", () => {
  const noFile = () => {
    throw new Error("no file");
  };
  assertEquals(
    thrown(() => parseCommandLine(["--feature-gates=Bogus=true"], noFile)),
    '--feature-gates: Invalid value: {"Bogus":true}: unrecognized feature gate: Bogus',
  );
  const file = () =>
    "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" +
    "featureGates: {NFTablesProxyMode: false}\n";
  assertEquals(
    thrown(() => parseCommandLine(["--config=/c.yaml"], file)),
    "--config: /c.yaml: featureGates: Invalid value: " +
      '{"NFTablesProxyMode":false}: cannot set feature gate NFTablesProxyMode to false, feature is locked to true',
  );
  const ok = parseCommandLine([`--feature-gates=${ALLOW_SERVICE_EXTERNAL_IPS}=false`], noFile);
  assertEquals(ok.config.features.enabled(ALLOW_SERVICE_EXTERNAL_IPS), false);
  assertEquals(ok.facts.notApplying.filter((n) => n.includes("featureGates")), []);
});
