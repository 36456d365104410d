import { assert, assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { KubeconfigError } from "../runtime/errors.ts";
import { type ApiAccessInputs, loadApiAccess, placeholderHost } from "./api_access.ts";
import { ApiClient } from "./api_client.ts";
import { serveTls } from "../../tests/support/net_helpers.ts";

const TLS = new URL("../../tests/testdata/tls/", import.meta.url).pathname;

function inputs(files: Record<string, string>, over: Partial<ApiAccessInputs> = {}): ApiAccessInputs {
  return {
    kubeconfig: "",
    master: "",
    env: () => undefined,
    readFile: (p) =>
      p in files ? Promise.resolve(files[p]) : Promise.reject(new Deno.errors.NotFound(`no ${p}`)),
    ...over,
  };
}

const kubeconfig = (user: string, cluster = "    server: https://10.0.0.1:6443\n") =>
  `apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: other
  context: {cluster: other, user: other}
- name: prod
  context: {cluster: prod, user: proxy}
clusters:
- name: other
  cluster: {server: "https://10.9.9.9"}
- name: prod
  cluster:
${cluster}users:
- name: other
  user: {token: wrong}
- name: proxy
  user:
${user}`;

Deno.test("kubeconfig: the current context's cluster and user; --master overrides only the server", async () => {
  const files = { "/etc/k/kubeconfig": kubeconfig("    token: s3cret\n") };
  const a = await loadApiAccess(inputs(files, { kubeconfig: "/etc/k/kubeconfig" }));
  assertEquals(a.server, "https://10.0.0.1:6443");
  assertEquals(a.origin, "/etc/k/kubeconfig");
  assertEquals((await a.headers()).get("authorization"), "Bearer s3cret");
  const b = await loadApiAccess(
    inputs(files, { kubeconfig: "/etc/k/kubeconfig", master: "https://lb:443/" }),
  );
  assertEquals(b.server, "https://lb");
  assertEquals((await b.headers()).get("authorization"), "Bearer s3cret");
});

Deno.test("kubeconfig: relative file paths are taken from the kubeconfig's directory", async () => {
  const files = {
    "/etc/k/kubeconfig": kubeconfig("    tokenFile: token\n"),
    "/etc/k/token": "from-file\n",
  };
  const a = await loadApiAccess(inputs(files, { kubeconfig: "/etc/k/kubeconfig" }));
  assertEquals((await a.headers()).get("authorization"), "Bearer from-file");
  const missing = kubeconfig("    client-certificate: proxy.crt\n    client-key: proxy.key\n");
  const e = await assertRejects(
    () => loadApiAccess(inputs({ "/etc/k/kubeconfig": missing }, { kubeconfig: "/etc/k/kubeconfig" })),
    KubeconfigError,
  );
  assert(e.message.includes("client-certificate: cannot read /etc/k/proxy.crt"), e.message);
});

Deno.test("in-cluster: the service account's token and CA, the service host (IPv6 in brackets)", async () => {
  const files = {
    "/var/run/secrets/kubernetes.io/serviceaccount/token": "sa-token",
    "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt": await Deno.readTextFile(`${TLS}ca.crt`),
  };
  const env: Record<string, string> = { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" };
  const a = await loadApiAccess(inputs(files, { env: (k) => env[k] }));
  assertEquals([a.server, a.origin], ["https://[fd00::1]:6443", "in-cluster"]);
  assertEquals((await a.headers()).get("authorization"), "Bearer sa-token");
  assert(a.client !== undefined, "the CA needs a client");
  a.client.close();
});

Deno.test("kubeconfig: what cannot work is refused up front, naming the file and field", async () => {
  const cases: Array<[string, RegExp]> = [
    [kubeconfig("    exec: {command: aws}\n"), /users\["proxy"\]\.exec is not supported/],
    [
      kubeconfig("    token: x\n", "    server: https://x\n    insecure-skip-tls-verify: true\n"),
      /insecure-skip-tls-verify/,
    ],
    [kubeconfig("    client-certificate-data: QQ==\n"), /needs its key/],
    [kubeconfig("    token: x\n", "    server: ftp://x\n"), /is not http\(s\)/],
    [
      kubeconfig("    token: x\n").replace("current-context: prod", "current-context: gone"),
      /current-context "gone"/,
    ],
    // Left as shipped: a placeholder, not a host to retry for ever.
    [
      kubeconfig("    token: x\n", "    server: https://CONTROL-PLANE-ENDPOINT:6443\n"),
      /clusters\["prod"\]\.server is the placeholder CONTROL-PLANE-ENDPOINT: set it/,
    ],
    [
      kubeconfig("    token: x\n", "    server: https://10.0.0.1\n    certificate-authority: ca.crt\n"),
      /clusters\["prod"\]\.certificate-authority \(\/ca\.crt\) is not PEM \(no "-----BEGIN CERTIFICATE-----" block\)/,
    ],
    [
      kubeconfig(`    client-certificate-data: ${btoa("junk")}\n    client-key-data: ${btoa("junk")}\n`),
      /users\["proxy"\]\.client-certificate-data is not PEM/,
    ],
    [
      kubeconfig(
        "    token: x\n",
        `    server: https://10.0.0.1\n    certificate-authority-data: ${
          btoa("-----BEGIN CERTIFICATE-----\nZZZZ\n-----END CERTIFICATE-----\n")
        }\n`,
      ),
      /clusters\["prod"\]\.certificate-authority-data: invalid peer certificate/,
    ],
  ];
  for (const [text, want] of cases) {
    const e = await assertRejects(
      () => loadApiAccess(inputs({ "/k": text, "/ca.crt": "not a certificate\n" }, { kubeconfig: "/k" })),
      KubeconfigError,
    );
    assert(want.test(e.message) && e.message.startsWith("kubeconfig /k: "), e.message);
  }
  const flag = await assertRejects(
    () => loadApiAccess(inputs({}, { master: "https://CONTROL-PLANE-ENDPOINT:6443" })),
    KubeconfigError,
  );
  assertEquals(
    flag.message,
    "--master: server is the placeholder CONTROL-PLANE-ENDPOINT: set it to the control plane's address",
  );
  // A host that may simply be unreachable now is not refused: an outage must not crash-loop a node.
  for (
    const server of ["https://api.example.internal:6443", "https://CONTROLPLANE:6443", "https://10.0.0.1"]
  ) {
    assertEquals(placeholderHost(server), undefined, server);
  }
  const none = await assertRejects(() => loadApiAccess(inputs({})), KubeconfigError);
  assertEquals(none.message, "no API server: give --kubeconfig or --master, or run in a cluster");
});

Deno.test("kubeconfig: a real HTTPS API server is reached through its CA, with the token", async () => {
  const ac = new AbortController();
  const seen: string[] = [];
  const server = await serveTls((req) => {
    seen.push(`${new URL(req.url).pathname} ${req.headers.get("authorization")}`);
    return Response.json({
      kind: "ServiceList",
      metadata: { resourceVersion: "7" },
      items: [{
        metadata: {
          name: "a",
          namespace: "ns",
          managedFields: [{ manager: "kubectl" }],
          ownerReferences: [{ kind: "Service", name: "a" }],
          annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}", keep: "me" },
        },
        endpoints: [{ addresses: ["10.0.0.1"], targetRef: { kind: "Pod", name: "p" } }],
      }],
    });
  }, ac.signal);
  try {
    const ca = btoa(await Deno.readTextFile(`${TLS}ca.crt`));
    const url = `https://127.0.0.1:${server.addr.port}`;
    const text = kubeconfig(
      "    token: t0k\n",
      `    server: ${url}\n    certificate-authority-data: ${ca}\n`,
    );
    const access = await loadApiAccess(inputs({ "/k": text }, { kubeconfig: "/k" }));
    const list = await new ApiClient(access).list("/api/v1/services");
    assertEquals(list.metadata?.resourceVersion, "7");
    assertEquals(
      list.items[0].metadata,
      { name: "a", namespace: "ns", annotations: { keep: "me" } },
      "slimmed",
    );
    assertEquals(seen, ["/api/v1/services Bearer t0k"]);
    access.client?.close();
    // Without the CA the server's certificate is not trusted: nothing is sent.
    const untrusted = await loadApiAccess(inputs({}, { master: url }));
    await assertRejects(() => new ApiClient(untrusted).list("/api/v1/services"), TypeError);
    assertEquals(seen.length, 1);
  } finally {
    ac.abort();
    await server.finished;
  }
});
