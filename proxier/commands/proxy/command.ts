/**
 * The proxy itself, upstream's ProxyServer: the command run when the first argument names no other.
 * `--cleanup` removes every mode's rules instead, `--init-only` does the privileged set-up alone.
 * Its code is loaded when it runs.
 * @module
 */
import { type CommandDefinition, EXIT } from "../../command_definition.ts";
import { parseProxyQuery, type ProxyQuery } from "./flags.ts";

/** `kube-proxy-deno [flags]`: the proxy. */
export const proxyCommand: CommandDefinition<ProxyQuery> = {
  name: "proxy",
  exits: [
    [EXIT.ok, "stopped by SIGTERM or SIGINT; --cleanup, --init-only or --write-config-to done"],
    [
      EXIT.failed,
      "could not start or keep running (a kernel tool, the API server, an address to listen on with " +
      "--bind-address-hard-fail, a source file that does not parse, a --cleanup that failed), or the " +
      "--config file changed (the supervisor starts it again)",
    ],
    [EXIT.usage, "bad flags or configuration, a source file that does not exist, no one node to act for"],
  ],
  flags: [],
  maxPositionals: 0,
  positionalsSay: "the proxy takes flags only",
  parse: parseProxyQuery,
  async run(query, context) {
    if (query.cleanup) return (await import("./cleanup.ts")).runCleanup(context);
    return (await import("./proxy_server.ts")).runProxyServer(query, context);
  },
};
