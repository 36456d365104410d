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
    ["DEPRECATED", "DEPRECATED", "ALPHA"],
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
  // The one GA gate upstream leaves settable.
  assertEquals(new FeatureGates({ ExecProbeTimeout: false }).enabled("ExecProbeTimeout"), false);
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
