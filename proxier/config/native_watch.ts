/**
 * A drop-in for client-node's `Watch` on Deno's own fetch. client-node's watch runs the npm
 * `undici` fetch, which under Deno does not notice a connection the API server dropped mid-stream:
 * the informer then stalls until its inactivity timeout. Deno's fetch reports the drop at once.
 * @module
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { WatchError } from "../errors.ts";

/** The callback signature of client-node's `Watch.watch`. */
export type WatchCallback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;

/** Options of {@linkcode NativeWatch}. */
export interface NativeWatchOptions {
  /** A stream silent for this long is presumed dead and aborted (the informer reconnects). */
  readonly inactivityTimeoutMs?: number;
  /** Server-side watch timeout range in seconds, randomized as client-go does. */
  readonly minTimeoutSeconds?: number;
}

/** Watches API paths with Deno's fetch, honouring the kubeconfig's server, TLS and auth. */
export class NativeWatch {
  readonly #kc: KubeConfig;
  readonly #inactivityMs: number;
  readonly #minTimeoutSeconds: number;

  /** Builds the watcher; opens no connection until {@linkcode watch}. */
  constructor(kc: KubeConfig, opts: NativeWatchOptions = {}) {
    this.#kc = kc;
    this.#inactivityMs = opts.inactivityTimeoutMs ?? 150_000;
    this.#minTimeoutSeconds = opts.minTimeoutSeconds ?? 300;
  }

  /**
   * Starts a watch of `path`: `callback` receives each event, `done` is called exactly once when
   * the stream ends (null) or fails (an error; `statusCode` set for HTTP errors). Returns the
   * controller that aborts it.
   */
  async watch(
    path: string,
    queryParams: Record<string, unknown>,
    callback: WatchCallback,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const controller = new AbortController();
    let finished = false;
    let client: Deno.HttpClient | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      controller.abort();
      client?.close();
      done(err);
    };
    const touch = () => {
      clearTimeout(timer);
      timer = setTimeout(
        () => finish(new DOMException("watch inactive", "TimeoutError")),
        this.#inactivityMs,
      );
    };
    try {
      const cluster = this.#kc.getCurrentCluster();
      if (!cluster) throw new Error("no current cluster in kubeconfig");
      const url = new URL(cluster.server + path);
      url.searchParams.set("watch", "true");
      url.searchParams.set("allowWatchBookmarks", "true");
      const t = this.#minTimeoutSeconds;
      url.searchParams.set("timeoutSeconds", String(t + Math.floor(Math.random() * t)));
      for (const [k, v] of Object.entries(queryParams)) {
        if (v !== undefined) url.searchParams.set(k, String(v));
      }
      const opts: { headers?: Record<string, unknown>; ca?: unknown; cert?: unknown; key?: unknown } = {};
      await this.#kc.applyToHTTPSOptions(opts as never);
      const headers = new Headers();
      for (const [k, v] of Object.entries(opts.headers ?? {})) headers.set(k, String(v));
      if (url.protocol === "https:") {
        const pem = (x: unknown) => x === undefined ? undefined : String(x);
        client = Deno.createHttpClient({
          caCerts: opts.ca === undefined ? undefined : [pem(opts.ca)!],
          cert: pem(opts.cert),
          key: pem(opts.key),
        } as Deno.CreateHttpClientOptions);
      }
      touch();
      const res = await fetch(url, { headers, signal: controller.signal, client });
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new WatchError(`watch ${path}: HTTP ${res.status} ${res.statusText}`, res.status);
      }
      (async () => {
        let rest = "";
        const decoder = new TextDecoder();
        for await (const chunk of res.body!) {
          touch();
          rest += decoder.decode(chunk, { stream: true });
          let nl;
          while ((nl = rest.indexOf("\n")) >= 0) {
            const line = rest.slice(0, nl);
            rest = rest.slice(nl + 1);
            if (line.trim() === "") continue;
            let ev: { type: string; object: unknown };
            try {
              ev = JSON.parse(line);
            } catch {
              continue; // as client-node: a garbled line is skipped
            }
            callback(ev.type, ev.object, ev);
          }
        }
        finish(null);
      })().catch((e) => finish(e));
    } catch (e) {
      finish(e);
    }
    return controller;
  }
}
