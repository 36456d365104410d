/**
 * How to reach the API server, resolved as upstream kube-proxy does: `--kubeconfig` (its current
 * context) with `--master` overriding the server, `--master` alone, or the in-cluster service
 * account. Read with our own small loader: client-node's `KubeConfig` pulls in every generated
 * API model (tens of MiB of resident memory) for what is a few fields of YAML.
 * @module
 */
import { loadBounded, YamlInputError } from "../runtime/bounded_yaml.ts";
import { KubeconfigError } from "../runtime/errors.ts";
import { apiHttpClient, type ApiTls } from "./api_http_client.ts";

/** The server, its TLS material and the credentials to present. */
export interface ApiAccess {
  /** Base URL, no trailing slash. */
  readonly server: string;
  /** Where it came from, for logs: `in-cluster`, `--master` or the kubeconfig path. */
  readonly origin: string;
  /** Headers for a request (a token file is re-read at most once a minute, as client-go). */
  headers(): Promise<Headers>;
  /** An HTTP client carrying the CA, client certificate and proxy; undefined when none is needed. */
  readonly client?: Deno.HttpClient;
  /**
   * The same TLS material and proxy for a connection of the program's own (a pod exec's stream,
   * whose refusal fetch and WebSocket cannot show): kept in memory only, as the HTTP client keeps it.
   */
  readonly tls: ApiTls;
  /** The kubeconfig's `proxy-url`, when it gives one. */
  readonly proxyURL?: string;
}

/** What {@linkcode loadApiAccess} reads; injected so tests need no files or environment. */
export interface ApiAccessInputs {
  readonly kubeconfig: string;
  readonly master: string;
  readonly env: (name: string) => string | undefined;
  readonly readFile: (path: string) => Promise<string>;
}

const SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";
const TOKEN_RELOAD_MS = 60_000;

/**
 * Returns the API access the flags describe. With neither flag: the in-cluster service account
 * when `KUBERNETES_SERVICE_HOST` is set, else `$KUBECONFIG` (its first file), else
 * `~/.kube/config`.
 * @throws {KubeconfigError} naming the file and field that is missing, unreadable or unsupported.
 */
export async function loadApiAccess(i: ApiAccessInputs): Promise<ApiAccess> {
  if (i.kubeconfig !== "") return await fromKubeconfig(i, i.kubeconfig, i.master);
  if (i.master !== "") return build(i, { server: i.master, origin: "--master", label: "--master" });
  const host = i.env("KUBERNETES_SERVICE_HOST");
  if (host !== undefined && host !== "") {
    const port = i.env("KUBERNETES_SERVICE_PORT") ?? "443";
    const caFile = `${SERVICE_ACCOUNT}/ca.crt`;
    const ca = { text: await read(i, caFile, "in-cluster config"), field: caFile };
    return build(i, {
      server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
      origin: "in-cluster",
      label: "in-cluster config",
      ca,
      tokenFile: `${SERVICE_ACCOUNT}/token`,
    });
  }
  const fromEnv = i.env("KUBECONFIG")?.split(":").find((p) => p !== "");
  const home = i.env("HOME");
  const path = fromEnv ?? (home ? `${home}/.kube/config` : undefined);
  if (path === undefined) {
    throw new KubeconfigError("no API server: give --kubeconfig or --master, or run in a cluster");
  }
  return await fromKubeconfig(i, path, "");
}

/** PEM material and the field (and file) it was read from, for errors that name it. */
interface Pem {
  readonly text: string;
  readonly field: string;
}

interface Parts {
  server: string;
  /** Where the server was given (`clusters["default"].server`); undefined: the label says it. */
  serverField?: string;
  origin: string;
  /** Prefix of error messages: the flag or `kubeconfig PATH`. */
  label: string;
  ca?: Pem;
  cert?: Pem;
  key?: Pem;
  token?: string;
  tokenFile?: string;
  basic?: { username: string; password: string };
  proxyURL?: string;
}

async function read(i: ApiAccessInputs, path: string, what: string): Promise<string> {
  try {
    return await i.readFile(path);
  } catch (e) {
    throw new KubeconfigError(`${what}: cannot read ${path}: ${(e as Error).message}`, { cause: e });
  }
}

type Named<T> = { name?: unknown; cluster?: T; user?: T; context?: T };

async function fromKubeconfig(i: ApiAccessInputs, path: string, master: string): Promise<ApiAccess> {
  const text = await read(i, path, "kubeconfig");
  let doc: Record<string, unknown>;
  try {
    doc = (loadBounded(text) ?? {}) as Record<string, unknown>;
  } catch (e) {
    if (!(e instanceof YamlInputError)) throw e;
    throw new KubeconfigError(`kubeconfig ${path}${e.line === undefined ? "" : `:${e.line}`}: ${e.reason}`, {
      cause: e,
    });
  }
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/") + 1) : "./";
  const where = (f: string) => `kubeconfig ${path}: ${f}`;
  const pick = <T>(list: unknown, name: unknown, kind: "cluster" | "user" | "context"): T | undefined => {
    if (!Array.isArray(list)) return undefined;
    const entry = (list as Named<T>[]).find((e) => e?.name === name);
    return entry?.[kind];
  };
  const current = doc["current-context"];
  const ctx = pick<{ cluster?: string; user?: string }>(doc.contexts, current, "context");
  if (ctx === undefined && master === "") {
    throw new KubeconfigError(
      where(`current-context ${JSON.stringify(current ?? "")} not found in contexts`),
    );
  }
  const cluster = pick<Record<string, unknown>>(doc.clusters, ctx?.cluster, "cluster") ?? {};
  const user = pick<Record<string, unknown>>(doc.users, ctx?.user, "user") ?? {};
  const str = (o: Record<string, unknown>, k: string): string | undefined => {
    const v = o[k];
    if (v === undefined || v === null || v === "") return undefined;
    if (typeof v !== "string") throw new KubeconfigError(where(`${k} must be a string`));
    return v;
  };
  const file = (p: string) => p.startsWith("/") ? p : dir + p;
  const data = async (
    o: Record<string, unknown>,
    at: string,
    dataKey: string,
    fileKey: string,
  ): Promise<Pem | undefined> => {
    const inline = str(o, dataKey);
    if (inline !== undefined) {
      try {
        const text = new TextDecoder().decode(Uint8Array.from(atob(inline), (c) => c.charCodeAt(0)));
        return { text, field: `${at}.${dataKey}` };
      } catch (e) {
        throw new KubeconfigError(where(`${dataKey} is not base64`), { cause: e });
      }
    }
    const f = str(o, fileKey);
    if (f === undefined) return undefined;
    return { text: await read(i, file(f), where(fileKey)), field: `${at}.${fileKey} (${file(f)})` };
  };
  const atCluster = `clusters[${JSON.stringify(ctx?.cluster)}]`;
  const atUser = `users[${JSON.stringify(ctx?.user)}]`;
  for (const k of ["exec", "auth-provider"]) {
    if (user[k] !== undefined && user[k] !== null) {
      throw new KubeconfigError(
        where(
          `users[${
            JSON.stringify(ctx?.user)
          }].${k} is not supported (it runs other programs); use a client certificate or token`,
        ),
      );
    }
  }
  if (cluster["insecure-skip-tls-verify"] === true) {
    throw new KubeconfigError(
      where("insecure-skip-tls-verify is not supported; give certificate-authority(-data) instead"),
    );
  }
  const server = master !== "" ? master : str(cluster, "server");
  if (server === undefined) throw new KubeconfigError(where(`${atCluster}.server is missing`));
  const username = str(user, "username");
  const tokenFile = str(user, "tokenFile");
  return build(i, {
    server,
    serverField: master !== "" ? "--master" : `${atCluster}.server`,
    origin: path,
    label: `kubeconfig ${path}`,
    ca: await data(cluster, atCluster, "certificate-authority-data", "certificate-authority"),
    cert: await data(user, atUser, "client-certificate-data", "client-certificate"),
    key: await data(user, atUser, "client-key-data", "client-key"),
    token: str(user, "token"),
    tokenFile: tokenFile === undefined ? undefined : file(tokenFile),
    basic: username === undefined ? undefined : { username, password: str(user, "password") ?? "" },
    proxyURL: str(cluster, "proxy-url"),
  });
}

/**
 * Returns the host of `server` when it is a placeholder left as shipped (`CONTROL-PLANE-ENDPOINT`:
 * capital words joined by `-` or `_`, which no operator writes as a host name), else undefined.
 * A real host that cannot be resolved or reached is not refused: an outage must not crash-loop.
 */
export function placeholderHost(server: string): string | undefined {
  const host = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/([^/:?#]+)/.exec(server)?.[1];
  return host !== undefined && /^[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)+$/.test(host) ? host : undefined;
}

function build(i: ApiAccessInputs, p: Parts): ApiAccess {
  let url: URL;
  try {
    url = new URL(p.server);
  } catch (e) {
    throw new KubeconfigError(`${p.label}: invalid server URL ${JSON.stringify(p.server)}`, { cause: e });
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new KubeconfigError(`${p.label}: server URL ${JSON.stringify(p.server)} is not http(s)`);
  }
  const placeholder = placeholderHost(p.server);
  if (placeholder !== undefined) {
    throw new KubeconfigError(
      `${p.label}: ${
        p.serverField ?? "server"
      } is the placeholder ${placeholder}: set it to the control plane's address`,
    );
  }
  if ((p.cert === undefined) !== (p.key === undefined)) {
    throw new KubeconfigError(`${p.label}: a client certificate needs its key, and a key its certificate`);
  }
  for (
    const [pem, kind] of [[p.ca, "CERTIFICATE"], [p.cert, "CERTIFICATE"], [p.key, "PRIVATE KEY"]] as const
  ) {
    if (pem !== undefined && !new RegExp(`-----BEGIN [A-Z ]*${kind}-----`).test(pem.text)) {
      throw new KubeconfigError(`${p.label}: ${pem.field} is not PEM (no "-----BEGIN ${kind}-----" block)`);
    }
  }
  const tls: ApiTls = {
    ...(p.ca === undefined ? {} : { caCerts: [p.ca.text] }),
    ...(p.cert !== undefined && p.key !== undefined ? { cert: p.cert.text, key: p.key.text } : {}),
  };
  let client: Deno.HttpClient | undefined;
  try {
    client = apiHttpClient(tls, p.proxyURL);
  } catch (e) {
    const fields = [p.ca, p.cert, p.key].filter((x) => x !== undefined).map((x) => x.field).join(", ");
    throw new KubeconfigError(`${p.label}: ${fields}: ${(e as Error).message}`, { cause: e });
  }
  let token = p.token;
  let tokenReadAt = -Infinity;
  return {
    server: url.href.replace(/\/+$/, ""),
    origin: p.origin,
    client,
    tls,
    ...(p.proxyURL === undefined ? {} : { proxyURL: p.proxyURL }),
    async headers() {
      const h = new Headers({ accept: "application/json" });
      if (p.tokenFile !== undefined && performance.now() - tokenReadAt >= TOKEN_RELOAD_MS) {
        token = (await read(i, p.tokenFile, `${p.label}: tokenFile`)).trim();
        tokenReadAt = performance.now();
      }
      if (token !== undefined) h.set("authorization", `Bearer ${token}`);
      else if (p.basic !== undefined) {
        h.set("authorization", `Basic ${btoa(`${p.basic.username}:${p.basic.password}`)}`);
      }
      return h;
    },
  };
}
