import { assert, assertEquals, assertMatch } from "../../../../tests/support/assert.ts";
import { TestApiServer } from "../../../../tests/support/api_server.ts";
import { serveTls } from "../../../../tests/support/net_helpers.ts";
import { type ExecAccess, type ExecOutcome, podExec } from "./pod_exec.ts";

const TARGET = { namespace: "kube-system", pod: "kube-proxy-a", container: "kube-proxy" };
const LIMITS = { deadlineMs: 10_000, maxOutputBytes: 1024 * 1024 };
const CA = await Deno.readTextFile(new URL("../../../../tests/testdata/tls/ca.crt", import.meta.url));

function access(server: string, o: Partial<ExecAccess> = {}): ExecAccess {
  return {
    server,
    tls: {},
    headers: () => Promise.resolve(new Headers({ authorization: "Bearer secret-token" })),
    ...o,
  };
}

async function withServer(fn: (api: TestApiServer, url: string) => Promise<void>): Promise<void> {
  const api = new TestApiServer();
  api.apply("pods", { metadata: { namespace: "kube-system", name: "kube-proxy-a" } });
  const url = api.start();
  try {
    await fn(api, url);
  } finally {
    await api.stop();
  }
}

Deno.test("pod exec: a real process's output on channels 1 and 2 and its exit code, whole, also in fragmented frames", async () => {
  for (const fragment of [false, true]) {
    await withServer(async (api, url) => {
      api.fragmentExec = fragment;
      const seen: string[][] = [];
      api.onExec = (r) => {
        seen.push([...r.command]);
        return {
          run: {
            cmd: "sh",
            args: ["-c", "head -c 300000 /dev/zero | tr '\\0' x; echo; echo oops >&2; exit 3"],
          },
        };
      };
      const out = await podExec(access(url), { ...TARGET, command: ["sh", "-c", "a b"] }, LIMITS);
      assertEquals(out.kind, "exited");
      const o = out as Extract<ExecOutcome, { kind: "exited" }>;
      assertEquals(o.exitCode, 3);
      assertEquals(o.stdout, "x".repeat(300000) + "\n");
      assertEquals(o.stderr, "oops\n");
      assertEquals(seen, [["sh", "-c", "a b"]], "the command's words arrive as they were given");
      assertEquals(
        api.access.filter((a) => a.resource === "pods/exec").map((a) => a.verb),
        ["get", "create"],
      );
    });
  }
});

Deno.test("pod exec: a success, a refusal with the API's own message, a command that cannot start, a hang cut at the deadline, output past the bound", async () => {
  await withServer(async (api, url) => {
    api.onExec = () => ({ print: { stdout: "fine", code: 0 } });
    assertEquals(await podExec(access(url), { ...TARGET, command: ["x"] }, LIMITS), {
      kind: "exited",
      exitCode: 0,
      stdout: "fine",
      stderr: "",
    });

    api.forbid = (a) => a.verb === "create" && a.resource === "pods/exec";
    const refused = await podExec(access(url), { ...TARGET, command: ["x"] }, LIMITS);
    assertEquals(refused.kind, "refused");
    assertEquals((refused as { status: number }).status, 403);
    assertMatch((refused as { message: string }).message, /cannot create resource "pods\/exec"/);
    api.forbid = () => false;

    const gone = await podExec(access(url), { ...TARGET, pod: "kube-proxy-zzz", command: ["x"] }, LIMITS);
    assertEquals(gone.kind === "refused" && gone.status, 404);

    const missing = 'exec: "kube-proxy-deno": executable file not found in $PATH: unknown';
    api.onExec = () => ({ fail: missing });
    assertEquals(await podExec(access(url), { ...TARGET, command: ["x"] }, LIMITS), {
      kind: "not-started",
      message: missing,
    });

    api.onExec = () => ({ hang: true });
    const started = performance.now();
    const hung = await podExec(access(url), { ...TARGET, command: ["x"] }, { ...LIMITS, deadlineMs: 500 });
    assertEquals(hung.kind, "timed-out");
    assert(performance.now() - started < 5000, "the deadline ends the exchange");

    api.onExec = () => ({ run: { cmd: "sh", args: ["-c", "head -c 3000000 /dev/zero"] } });
    assertEquals(
      await podExec(access(url), { ...TARGET, command: ["x"] }, { ...LIMITS, maxOutputBytes: 100_000 }),
      { kind: "too-large", limit: 100_000 },
    );
  });
});

Deno.test("pod exec: a server that accepts and never answers ends at the deadline; a deadline that passes after an answer is nobody's failure", async () => {
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  (async () => {
    for await (const c of silent) held.push(c);
  })().catch(() => {});
  try {
    const out = await podExec(
      access(`http://127.0.0.1:${silent.addr.port}`),
      { ...TARGET, command: ["x"] },
      { ...LIMITS, deadlineMs: 300 },
    );
    assertEquals(out.kind, "timed-out");
  } finally {
    silent.close();
    for (const c of held) c.close();
  }
  await withServer(async (api, url) => {
    api.onExec = () => ({ print: { stdout: "quick", code: 0 } });
    const out = await podExec(access(url), { ...TARGET, command: ["x"] }, { ...LIMITS, deadlineMs: 200 });
    assertEquals(out.kind, "exited");
    // The deadline fires after the answer: it must reject nothing anyone is left to handle.
    await new Promise((r) => setTimeout(r, 400));
  });
});

Deno.test("pod exec: the client speaks Deno's own WebSocket server over TLS verified with the kubeconfig's CA, and refuses a server it cannot verify", async () => {
  const ac = new AbortController();
  let auth: string | null = null;
  let protocols: string | null = null;
  let query = "";
  const server = await serveTls((req) => {
    auth = req.headers.get("authorization");
    protocols = req.headers.get("sec-websocket-protocol");
    query = new URL(req.url).search;
    const { socket, response } = Deno.upgradeWebSocket(req, { protocol: "v5.channel.k8s.io" });
    socket.onopen = () => {
      socket.send(new Uint8Array([1]));
      socket.send(new Uint8Array([1, ...new TextEncoder().encode("hello")]));
      socket.send(new Uint8Array([3, ...new TextEncoder().encode('{"metadata":{},"status":"Success"}')]));
    };
    return response;
  }, ac.signal);
  try {
    const url = `https://127.0.0.1:${server.addr.port}`;
    const out = await podExec(
      access(url, { tls: { caCerts: [CA] } }),
      { ...TARGET, command: ["a", "b c"] },
      LIMITS,
    );
    assertEquals(out, { kind: "exited", exitCode: 0, stdout: "hello", stderr: "" });
    assertEquals(auth, "Bearer secret-token");
    assertEquals(protocols, "v5.channel.k8s.io, v4.channel.k8s.io");
    assertEquals(
      new URLSearchParams(query).getAll("command"),
      ["a", "b c"],
    );
    const untrusted = await podExec(access(url), { ...TARGET, command: ["a"] }, LIMITS);
    assertEquals(untrusted.kind, "unreachable");
    assertMatch((untrusted as { message: string }).message, /certificate|UnknownIssuer/i);
  } finally {
    ac.abort();
    await server.finished;
  }
});
