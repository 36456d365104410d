/**
 * The context every command runs with, built once from the command line and this process (kubectl's
 * Factory): so the node's name, its interface addresses and the API access each have one reading.
 * @module
 */
import { DenoSessionExecutor } from "../../iptables/tool_session.ts";
import { KUBE_IPVS_INTERFACE } from "../../iptables/ip_link.ts";
import type { CommandContext } from "../command_definition.ts";
import { MODES } from "../modes.ts";
import type { Logger } from "../runtime/logger.ts";
import { writeText } from "../runtime/output.ts";
import { loadApiAccess } from "../sources/api_access.ts";
import type { CommandLine } from "./command_line.ts";

/** What the process gives a command beyond its command line (`main.ts` reads the environment). */
export interface ProcessFacts {
  /** This process's environment. */
  readonly env: (name: string) => string | undefined;
  readonly log: Logger;
  /** Ends a running proxy as SIGTERM does (for embedders such as the demo). */
  readonly stop?: AbortSignal;
}

/** Returns the context `line`'s command runs with. */
export function commandContext(line: CommandLine, p: ProcessFacts): CommandContext {
  const { config } = line;
  const hostname = Deno.hostname();
  return {
    config,
    configFor: line.configFor,
    facts: line.facts,
    modes: MODES,
    // Every mode a flag or config file can name is built; parsing refused any other.
    mode: MODES.get(config.mode)!,
    exec: new DenoSessionExecutor({ timeoutMs: config.kernelToolTimeoutMs }),
    log: p.log,
    stdout: (text) => writeText(Deno.stdout, text),
    stderr: (text) => writeText(Deno.stderr, text),
    // Upstream's node name: the override, else the hostname in lower case.
    nodeName: config.hostnameOverride || hostname.toLowerCase(),
    hostname,
    // The node's own: kube-ipvs0 holds the service addresses the ipvs mode binds (as upstream, which
    // reads every local address but the dummy's), never an address a NodePort answers on.
    interfaceAddresses: () =>
      Deno.networkInterfaces().filter((i) => i.name !== KUBE_IPVS_INTERFACE).map((i) => i.address),
    apiAccess: () =>
      loadApiAccess({
        kubeconfig: config.kubeconfig,
        master: config.master,
        env: p.env,
        readFile: (path) => Deno.readTextFile(path),
      }),
    toolPath: p.env("PATH"),
    stop: p.stop,
  };
}
