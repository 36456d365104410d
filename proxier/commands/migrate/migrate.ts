/**
 * `kube-proxy-deno migrate --to=MODE`: what moving this node to another mode (or configuration)
 * would change for each Service's clients, before it happens. It reads what programs the node now
 * (the live rules of this program's or upstream's mode, or a saved listing, `--rules`), renders the
 * target for the same objects (the file source's, or the API's listed once), asks both datapaths
 * about every client `explain` knows, and prints what differs, grouped by cause (`compare.ts`).
 * Touches nothing on the node.
 * @module
 */
import {
  type CommandContext,
  CommandFailure,
  comparisonExit,
  EXIT,
  type ExitCode,
} from "../../command_definition.ts";
import type { ModeRenderer, ProxyModeDefinition } from "../../mode_definition.ts";
import type { RulesSource } from "../../trace/packet.ts";
import type { FamilyView } from "../../family_view.ts";
import { isLoopback } from "../../model/net.ts";
import { FileSource } from "../../sources/file.ts";
import { listOnce } from "../../sources/list_once.ts";
import { datapathCheck, dropsInvalid } from "../../read_side/datapath_check.ts";
import { readSideApiAccess } from "../../read_side/api_access.ts";
import { nodeSources } from "../../read_side/route.ts";
import { fileNode, type Rendered, renderObjects } from "../../read_side/render.ts";
import { compareMigration, type MigrationReport, pairsOf } from "./compare.ts";
import { formatMigration } from "./format.ts";
import type { MigrateQuery } from "./flags.ts";

/**
 * Runs `migrate`; returns the comparison's exit code: ok when every connection was compared and
 * nothing a client would notice changes, failed when something does, notChecked when nothing
 * compared changes but some connection could not be compared.
 * @throws {CommandFailure} failed when the rules or objects cannot be read; usage for a mode without
 * a tracer or render, no mode's rules on the node, a file that does not exist, a source without one
 * node to act for.
 */
export async function runMigrate(q: MigrateQuery, r: CommandContext): Promise<ExitCode> {
  const fail = (code: ExitCode, text: string) => new CommandFailure(code, text);
  let rulesText: string | undefined;
  if (q.rulesFiles.length > 0) {
    const texts: string[] = [];
    for (const f of q.rulesFiles) {
      try {
        texts.push(await Deno.readTextFile(f));
      } catch (e) {
        throw fail(EXIT.usage, `--rules: ${JSON.stringify(f)}: ${(e as Error).message}`);
      }
    }
    // Each file may hold one family's listing or both: the tracers take each family's part.
    rulesText = texts.map((t) => t.endsWith("\n") ? t : `${t}\n`).join("");
  }
  const where = rulesText === undefined ? "on this node" : `in ${q.rulesFiles.join(", ")}`;
  const source: RulesSource = rulesText !== undefined
    ? { text: rulesText }
    : { exec: r.exec, family: "IPv4" };
  let from: ProxyModeDefinition | undefined;
  if (q.from !== undefined) {
    from = r.modes.get(q.from)!;
    // Naming the mode does not make its rules appear: comparing with none would report every
    // Service as changed.
    if (from.recognizes !== undefined && !await from.recognizes(source).catch(() => false)) {
      throw fail(EXIT.usage, `--from-mode=${q.from}: no ${q.from} mode's Service rules found ${where}`);
    }
  } else from = await programming(r, source);
  if (from === undefined) {
    throw fail(
      EXIT.usage,
      `no mode's Service rules found ${where}; name the mode that programs it with --from-mode`,
    );
  }
  const to = r.modes.get(q.to)!;
  for (const m of [from, to]) {
    if (m.trace === undefined || m.render === undefined) {
      throw fail(EXIT.usage, `mode "${m.name}" cannot be compared yet`);
    }
  }
  // The objects' problems are the target's to say: the current mode's would describe what changes.
  // On a live node both modes are rendered for its own addresses, as the running proxy reads them.
  const live = rulesText === undefined ? r.interfaceAddresses().filter((ip) => !isLoopback(ip)) : undefined;
  const [b, a] = [await render(r, q, from, live, () => false), await render(r, q, to, live)];
  // On a live node its own connections leave from the address its kernel picks toward the Service.
  const views = [...b.renderer.explain.views(), ...a.renderer.explain.views()];
  const routes = rulesText === undefined
    ? await nodeSources(r.exec, views.flatMap((v) => [...v.services.values()].map((s) => s.clusterIP)))
    : undefined;
  const nodeAddresses = nodeAddressesOf(q, live, views);
  const pairs = pairsOf(b.renderer.explain.views(), a.renderer.explain.views(), {
    nodeSource: routes === undefined ? undefined : (dst) => routes.get(dst),
    nodeAddresses: nodeAddresses.addresses,
  });
  const asked = pairs.map((p) => ({ client: p.client, view: p.view }));
  const beforeSources = {
    tracer: from,
    exec: r.exec,
    config: r.configFor(from.name),
    rendered: rulesText === undefined ? undefined : () => rulesText,
    // Where a mode's own sockets decide (the userspace mode's listeners), they route as its model does.
    answer: b.renderer.explain.answer,
    localAddresses: nodeAddresses.addresses,
  };
  const afterSources = {
    tracer: to,
    exec: r.exec,
    config: r.configFor(to.name),
    rendered: a.renderer.explain.rendered,
    answer: a.renderer.explain.answer,
    localAddresses: nodeAddresses.addresses,
  };
  const beforeAnswers = await datapathCheck(beforeSources)(asked);
  const afterAnswers = await datapathCheck(afterSources)(asked);
  // Mode-wide facts are read from the rules themselves where they can be: the node may run another
  // program's layout of the mode (upstream's nftables mode drops no INVALID packet).
  const [view4] = a.renderer.explain.views();
  const [invalidBefore, invalidAfter] = view4 === undefined
    ? [undefined, undefined]
    : [await dropsInvalid(beforeSources, view4), await dropsInvalid(afterSources, view4)];
  const report: MigrationReport = compareMigration({
    node: a.nodeName,
    from: { mode: from.name, rules: q.rulesFiles.length > 0 ? q.rulesFiles.join(", ") : "live" },
    to: { mode: to.name, rules: "rendered" },
    nodeAddresses,
    pairs,
    before: beforeAnswers,
    after: afterAnswers,
    beforeViews: b.renderer.explain.views(),
    advice: to.migrationAdvice,
    wide: {
      before: {
        traits: from.traits,
        liberal: r.configFor(from.name).conntrack.tcpBeLiberal,
        dropsInvalid: invalidBefore,
      },
      after: {
        traits: to.traits,
        liberal: r.configFor(to.name).conntrack.tcpBeLiberal,
        dropsInvalid: invalidAfter,
      },
    },
  });
  r.stdout(q.output === "json" ? JSON.stringify(report, null, 2) + "\n" : formatMigration(report));
  return comparisonExit(report.groups.length, report.unanswered.length);
}

/**
 * Every address of the node, where each NodePort is asked: a live node's interfaces (`live`), else
 * `--node-ip`'s (given once per address), else the Node object's; with where they came from.
 */
function nodeAddressesOf(
  q: MigrateQuery,
  live: readonly string[] | undefined,
  views: readonly FamilyView[],
): MigrationReport["nodeAddresses"] {
  if (live !== undefined) return { addresses: live, from: "this node's interfaces" };
  if (q.nodeIPs !== undefined && q.nodeIPs.length > 0) {
    return { addresses: [...q.nodeIPs], from: "--node-ip" };
  }
  const addresses = [...new Set(views.flatMap((v) => v.nodeIPs))];
  return {
    addresses,
    from: addresses.length > 0 ? "the Node object's addresses" : "none known (--node-ip gives them)",
  };
}

/** The first mode (registry order) whose Service rules `source` (the node, or a listing) holds. */
async function programming(r: CommandContext, source: RulesSource): Promise<ProxyModeDefinition | undefined> {
  for (const m of r.modes.values()) {
    if (m.recognizes !== undefined && await m.recognizes(source).catch(() => false)) return m;
  }
  return undefined;
}

/** `mode`'s proxiers rendered over the objects: the file source's, or the API's listed once. */
async function render(
  r: CommandContext,
  q: MigrateQuery,
  mode: ProxyModeDefinition,
  nodeIPs: readonly string[] | undefined,
  warnAbout?: (key: string, o: object) => boolean,
): Promise<Rendered> {
  const config = r.configFor(mode.name);
  let nodeName = r.nodeName;
  let load = async (handler: ModeRenderer["handler"]) =>
    listOnce(await readSideApiAccess(r, "migrate reads the Services from the API"), nodeName, handler);
  if (config.source.kind === "file") {
    const path = config.source.path;
    nodeName = await fileNode(path, config.hostnameOverride);
    load = (handler) => new FileSource({ path, nodeName, handler, log: r.log, strict: true }).load();
  }
  return await renderObjects({
    mode,
    config,
    log: r.log,
    nodeIPs: nodeIPs ?? q.nodeIPs,
    nodeName,
    load,
    warnAbout,
  });
}
