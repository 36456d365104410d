/**
 * `kube-proxy-deno trace`: where one new connection goes through this node's service rules. The
 * command decides which mode's rules to read and, when the query leaves them out, the packet's
 * source and the interface it comes in on; the tracers (`trace/packet.ts`'s contract) do the rest.
 * @module
 */
import type { Executor } from "../../../iptables/executor.ts";
import { type CommandContext, CommandFailure, EXIT, type ExitCode } from "../../command_definition.ts";
import { ipFamily } from "../../model/net.ts";
import type { ProxyConfig } from "../../options/config.ts";
import { type RulesSource, type TraceQuery, traceSource } from "../../trace/packet.ts";
import { renderFileSource } from "../../read_side/render.ts";
import { route } from "../../read_side/route.ts";
import type { TraceArgs } from "./flags.ts";
import { formatTrace } from "./report.ts";

/**
 * The interface a packet from `q.src` comes in on when `--in-interface` is not given: the one the
 * route to it uses (live rules), else for a pod the bridge or a name with the configured prefix.
 */
async function assumeInInterface(q: TraceQuery, config: ProxyConfig, exec: Executor): Promise<TraceQuery> {
  if (q.inInterface !== undefined || q.from === "node" || q.src === undefined) return q;
  const dev = live(q) ? (await route(exec, q.src)).dev : undefined;
  if (dev !== undefined) {
    return { ...q, inInterface: dev, inInterfaceAssumed: `the route to ${q.src} uses it` };
  }
  if (q.from !== "pod") return q;
  const { bridgeInterface, interfaceNamePrefix } = config.detectLocal;
  if (config.detectLocalMode === "BridgeInterface" && bridgeInterface) {
    return { ...q, inInterface: bridgeInterface, inInterfaceAssumed: "--pod-bridge-interface" };
  }
  if (config.detectLocalMode === "InterfaceNamePrefix" && interfaceNamePrefix) {
    return {
      ...q,
      inInterface: `${interfaceNamePrefix}0`,
      inInterfaceAssumed: "--pod-interface-name-prefix",
    };
  }
  return q;
}

/** True when `q` reads this node's live rules (no file, no rendered text). */
const live = (q: TraceQuery) => q.rulesFile === undefined && q.rulesText === undefined;

/**
 * `trace`: which endpoint one new connection reaches, through this node's live rules, a rules file
 * (`--rules`), or the rules `render` writes for a file source's objects (`--source=file:`); writes
 * nothing to the node. Returns {@linkcode EXIT.ok} once traced.
 * @throws {CommandFailure} failed when the rules cannot be read (or a source file does not parse),
 * usage for a `--rules` file that does not exist, a mode without a tracer, or a source without one
 * node to act for.
 */
export async function runTrace(args: TraceArgs, r: CommandContext): Promise<ExitCode> {
  let q: TraceQuery = { ...args, modeChosen: r.facts.modeChosen };
  let mode = r.mode;
  const interfaceIPs = r.interfaceAddresses();
  let nodeIPs: readonly string[] = [...q.nodeIPs, ...interfaceIPs];
  if (r.config.source.kind === "file" && q.rulesFile === undefined) {
    // The objects' rules, as render writes them: never this host's live rules.
    const rendered = await renderFileSource({
      mode,
      config: r.config,
      log: r.log,
      nodeIPs: q.nodeIPs.length > 0 ? q.nodeIPs : undefined,
    });
    const family = ipFamily(q.dst) ?? "IPv4";
    const { explain } = rendered.renderer;
    nodeIPs = explain.views().find((v) => v.family === family)?.nodeIPs ?? [];
    q = {
      ...q,
      modeChosen: true,
      rulesText: explain.rendered(family) ?? "",
      rulesName: `rendered for node ${rendered.nodeName} from ${r.config.source.path}`,
      nodeIPsAssumed: `the rendered node's: ${rendered.renderer.nodeAddresses()}`,
    };
  } else if (q.rulesFile !== undefined && q.nodeIPs.length === 0) {
    q = {
      ...q,
      nodeIPsAssumed: `this machine's (${
        interfaceIPs.join(", ") || "none"
      }); --node-ip gives the file's node's`,
    };
  }
  if (q.src === undefined && q.from === "node") {
    // As the kernel would: the source its route to the destination picks (live), else a node address.
    const family = ipFamily(q.dst) ?? "IPv4";
    const routed = live(q) ? (await route(r.exec, q.dst)).src : undefined;
    q = routed !== undefined
      ? { ...q, src: routed, srcAssumed: `the node's route to ${q.dst} picks it` }
      : { ...q, src: traceSource(q, family, nodeIPs), srcAssumed: "the node's first address of the family" };
  }
  q = await assumeInInterface(q, r.config, r.exec);
  let result;
  try {
    if (!q.modeChosen) {
      const source: RulesSource = q.rulesFile !== undefined
        ? { text: await Deno.readTextFile(q.rulesFile) }
        : { exec: r.exec, family: ipFamily(q.dst) ?? "IPv4" };
      for (const m of r.modes.values()) {
        if (m.recognizes !== undefined && await m.recognizes(source)) {
          mode = m;
          break;
        }
      }
    }
    if (mode.trace === undefined) {
      throw new CommandFailure(EXIT.usage, `--proxy-mode: no tracer for mode "${mode.name}" yet`);
    }
    result = await mode.trace(q, { exec: r.exec, config: r.config, nodeIPs });
  } catch (e) {
    if (e instanceof CommandFailure) throw e;
    const what = q.rulesFile !== undefined
      ? `--rules: ${JSON.stringify(q.rulesFile)}`
      : q.rulesName ?? "cannot read the live rules";
    const code = q.rulesFile !== undefined && e instanceof Deno.errors.NotFound ? EXIT.usage : EXIT.failed;
    throw new CommandFailure(code, `${what}: ${(e as Error).message}`, { cause: e });
  }
  r.stdout(formatTrace(q, result, mode.name));
  return EXIT.ok;
}
