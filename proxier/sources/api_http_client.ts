/**
 * The HTTP client that reaches the API server: its CA, the client certificate and the proxy, from
 * values a worker's message can carry, so a list fetched on a worker connects as the main thread's.
 * @module
 */

/** The TLS material of the API server's connection, kept in memory only. */
export interface ApiTls {
  readonly caCerts?: readonly string[];
  readonly cert?: string;
  readonly key?: string;
}

/**
 * Returns the client for `tls` and `proxyURL`; undefined when neither asks for one (Deno's default
 * client then serves). @throws what `Deno.createHttpClient` throws on material it cannot use.
 */
export function apiHttpClient(tls: ApiTls, proxyURL: string | undefined): Deno.HttpClient | undefined {
  const { caCerts, cert, key } = tls;
  if (caCerts === undefined && cert === undefined && proxyURL === undefined) return undefined;
  return Deno.createHttpClient({
    caCerts: caCerts === undefined ? undefined : [...caCerts],
    proxy: proxyURL === undefined ? undefined : { url: proxyURL },
    ...(cert !== undefined && key !== undefined ? { cert, key } : {}),
  });
}
