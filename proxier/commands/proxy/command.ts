/**
 * The proxy itself, upstream's ProxyServer: the command run when the first argument names no other.
 * `--cleanup` removes every mode's rules instead, `--init-only` does the privileged set-up alone.
 * Its code is loaded when it runs.
 * @module
 */
import type { CommandDefinition } from "../../command_definition.ts";
import { parseProxyQuery, type ProxyQuery } from "./flags.ts";

/** `kube-proxy-deno [flags]`: the proxy. */
export const proxyCommand: CommandDefinition<ProxyQuery> = {
  name: "proxy",
  flags: [],
  maxPositionals: 0,
  positionalsSay: "the proxy takes flags only",
  parse: parseProxyQuery,
  async run(query, context) {
    if (query.cleanup) return (await import("./cleanup.ts")).runCleanup(context);
    return (await import("./proxy_server.ts")).runProxyServer(query, context);
  },
};
