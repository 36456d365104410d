/**
 * The shipped manifests bootstrap a real cluster: kubeadm's DaemonSet shape (its command line,
 * privileged, host network, every taint tolerated, the xtables lock and modules, a kubeconfig that
 * points at the control plane rather than the `kubernetes` Service), the image answering to
 * `/usr/local/bin/kube-proxy`, and the systemd unit.
 */
import { loadAll } from "js-yaml";
import { assert, assertEquals, assertMatch, assertRejects } from "../support/assert.ts";
import { KubeconfigError } from "../../proxier/runtime/errors.ts";
import { loadApiAccess } from "../../proxier/sources/api_access.ts";
import { parseCommandLine } from "../../proxier/cli/command_line.ts";
import { defaultConfig } from "../../proxier/options/kube_proxy_configuration.ts";

const read = (path: string) => Deno.readTextFileSync(new URL(`../../${path}`, import.meta.url));
// deno-lint-ignore no-explicit-any
type Obj = any;
const docs = loadAll(read("deploy/daemonset.yaml")) as Obj[];
const byKind = (kind: string) => docs.find((d) => d.kind === kind);

Deno.test("deploy: the DaemonSet has kubeadm's shape: its command line, privileged, host network, every taint", () => {
  const ds = byKind("DaemonSet");
  assertEquals([ds.metadata.name, ds.metadata.namespace], ["kube-proxy", "kube-system"]);
  assertEquals(ds.spec.updateStrategy, { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } });
  const pod = ds.spec.template.spec;
  assertEquals([pod.serviceAccountName, pod.priorityClassName, pod.hostNetwork], [
    "kube-proxy",
    "system-node-critical",
    true,
  ]);
  assertEquals(pod.tolerations, [{ operator: "Exists" }]);
  const c = pod.containers[0];
  assertEquals(c.command, [
    "/usr/local/bin/kube-proxy",
    "--config=/var/lib/kube-proxy/config.conf",
    "--hostname-override=$(NODE_NAME)",
  ]);
  assertEquals(c.env, [{ name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } }]);
  assertEquals(c.securityContext, { privileged: true });
  assertEquals(c.livenessProbe.httpGet, { path: "/livez", port: 10256, host: "127.0.0.1" });
  // Ready once the first sync is in: with maxUnavailable 1 a proxy that cannot sync stops the rollout.
  assertEquals(c.readinessProbe.httpGet, { path: "/readyz", port: 10256, host: "127.0.0.1" });
  assertMatch(c.image, /^REGISTRY\/kube-proxy-deno:/);
  const mounts = Object.fromEntries(c.volumeMounts.map((m: Obj) => [m.name, m]));
  const volumes = Object.fromEntries(pod.volumes.map((v: Obj) => [v.name, v]));
  assertEquals(mounts["lib-modules"], { name: "lib-modules", mountPath: "/lib/modules", readOnly: true });
  assertEquals(volumes["lib-modules"].hostPath, { path: "/lib/modules" });
  assertEquals(mounts["xtables-lock"].mountPath, "/run/xtables.lock");
  assertEquals(volumes["xtables-lock"].hostPath, { path: "/run/xtables.lock", type: "FileOrCreate" });
  assertEquals(mounts["kube-proxy"].mountPath, "/var/lib/kube-proxy");
  assertEquals(volumes["kube-proxy"].configMap, { name: "kube-proxy" });
  // The built-in role every kube-proxy has (Services, EndpointSlices, Nodes, Events).
  const binding = byKind("ClusterRoleBinding");
  assertEquals(binding.roleRef.name, "system:node-proxier");
  assertEquals(binding.subjects, [{ kind: "ServiceAccount", name: "kube-proxy", namespace: "kube-system" }]);
  // ServiceCIDRs, which the built-in role of clusters before them lacks: list and watch, bound too.
  const role = byKind("ClusterRole");
  assertEquals(role.rules, [{
    apiGroups: ["networking.k8s.io"],
    resources: ["servicecidrs"],
    verbs: ["list", "watch"],
  }]);
  const bindings = docs.filter((d) => d.kind === "ClusterRoleBinding").map((
    b,
  ) => [b.roleRef.name, b.subjects[0].name]);
  assertEquals(bindings, [["system:node-proxier", "kube-proxy"], [role.metadata.name, "kube-proxy"]]);
});

Deno.test("deploy: the ConfigMap's files start the program with the DaemonSet's command line, reaching the control plane", async () => {
  const cm = byKind("ConfigMap");
  assertEquals([cm.metadata.name, Object.keys(cm.data).sort()], ["kube-proxy", [
    "config.conf",
    "kubeconfig.conf",
  ]]);
  const argv = byKind("DaemonSet").spec.template.spec.containers[0].command.slice(1)
    .map((a: string) => a.replace("$(NODE_NAME)", "node-1"));
  const files: Record<string, string> = {
    "/var/lib/kube-proxy/config.conf": cm.data["config.conf"],
    "/var/lib/kube-proxy/kubeconfig.conf": cm.data["kubeconfig.conf"],
    "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt": read("tests/testdata/tls/ca.crt"),
    "/var/run/secrets/kubernetes.io/serviceaccount/token": "token-1\n",
  };
  const cmd = parseCommandLine(argv, (p) => files[String(p)]);
  assertEquals([cmd.action, cmd.named, cmd.warnings], ["run", false, []]);
  assertEquals(cmd.config, {
    ...defaultConfig(),
    kubeconfig: "/var/lib/kube-proxy/kubeconfig.conf",
    clusterCIDRs: ["10.244.0.0/16"],
    hostnameOverride: "node-1",
  });
  const load = () =>
    loadApiAccess({
      kubeconfig: cmd.config.kubeconfig,
      master: "",
      env: () => undefined,
      readFile: (p) => Promise.resolve(files[p] ?? Promise.reject(new Deno.errors.NotFound(p))),
    });
  // As shipped, the placeholder is refused at start, naming it; replaced as deploy/README says, it is
  // the control-plane endpoint, never the `kubernetes` Service only a running proxy makes reachable.
  const shipped = await assertRejects(load, KubeconfigError);
  assertMatch(
    shipped.message,
    /kubeconfig\.conf: clusters\["default"\]\.server is the placeholder CONTROL-PLANE-ENDPOINT/,
  );
  files["/var/lib/kube-proxy/kubeconfig.conf"] = cm.data["kubeconfig.conf"].replace(
    "CONTROL-PLANE-ENDPOINT",
    "192.168.0.10",
  );
  const access = await load();
  assertEquals(access.server, "https://192.168.0.10:6443");
  assertEquals((await access.headers()).get("authorization"), "Bearer token-1");
  access.client?.close();
});

Deno.test("deploy: the image answers to kubeadm's /usr/local/bin/kube-proxy", () => {
  const last = read("Dockerfile").slice(read("Dockerfile").lastIndexOf("\nFROM "));
  assertMatch(last, /\nCOPY --from=build \/src\/kube-proxy-deno \/usr\/local\/bin\/kube-proxy-deno\n/);
  assertMatch(last, /\nRUN ln -s kube-proxy-deno \/usr\/local\/bin\/kube-proxy\n/);
});

Deno.test("deploy: the systemd unit reads --config from /etc/kube-proxy-deno, OOMScoreAdjust=-999, restarts on failure", () => {
  const unit = read("deploy/kube-proxy-deno.service");
  const exec = /\nExecStart=(.*)\n/.exec(unit)![1].split(" ");
  assertEquals(exec[0], "/usr/local/bin/kube-proxy-deno");
  const cmd = parseCommandLine(
    exec.slice(1).map((a) => a.replace("%H", "node-1")),
    (p) => String(p) === "/etc/kube-proxy-deno/config.conf" ? read("deploy/kube-proxy-config.yaml") : "",
  );
  assertEquals([cmd.action, cmd.named, cmd.warnings, cmd.config.hostnameOverride], [
    "run",
    false,
    [],
    "node-1",
  ]);
  for (const line of ["OOMScoreAdjust=-999", "Restart=on-failure"]) {
    assert(unit.includes(`\n${line}\n`), line);
  }
});

Deno.test("deploy: the README's commands replace every placeholder of the DaemonSet, and the result starts", async () => {
  const readme = read("deploy/README.md");
  const block = /```sh\n(REGISTRY=[^\n]*\nSERVER=[\s\S]*?)```/.exec(readme)![1];
  // The block as written, up to its kubectl line (which needs a cluster).
  const script = block.slice(0, block.indexOf("kubectl apply")).replace("> kube-proxy-deno.yaml", "");
  const out = await new Deno.Command("sh", {
    args: ["-c", script],
    cwd: new URL("../..", import.meta.url).pathname,
    stdout: "piped",
  }).output();
  assertEquals(out.code, 0);
  const text = new TextDecoder().decode(out.stdout);
  for (const placeholder of ["REGISTRY/", "CONTROL-PLANE-ENDPOINT"]) {
    assert(!text.includes(placeholder), placeholder);
  }
  const [ds, cm] = ["DaemonSet", "ConfigMap"].map((k) => (loadAll(text) as Obj[]).find((d) => d.kind === k));
  assertMatch(ds.spec.template.spec.containers[0].image, /^registry\.example\.com\/infra\/kube-proxy-deno:/);
  const access = await loadApiAccess({
    kubeconfig: "/k/kubeconfig.conf",
    master: "",
    env: () => undefined,
    readFile: (p) =>
      p === "/k/kubeconfig.conf"
        ? Promise.resolve(cm.data["kubeconfig.conf"])
        : Promise.resolve(read("tests/testdata/tls/ca.crt")),
  });
  assertEquals(access.server, "https://192.168.0.10:6443");
  access.client?.close();
});
