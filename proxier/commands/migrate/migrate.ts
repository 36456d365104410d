/**
 * `kube-proxy-deno migrate --to=MODE`: what moving this node to another mode (or configuration)
 * would change for each Service's clients, before it happens. It reads what programs the node now
 * (the live rules of this program's or upstream's mode, or a saved listing, `--rules`), renders the
 * target for the same objects (the file source's, or the API's listed once), asks both datapaths
 * about every client `explain` knows, and prints what differs, grouped by cause (`compare.ts`).
 * Touches nothing on the node.
 * @module
 */
import type { CommandContext } from "../../command_definition.ts";
import type { ModeRenderer, ProxyModeDefinition } from "../../mode_definition.ts";
import type { RulesSource } from "../../trace/packet.ts";
import { FileSource } from "../../sources/file.ts";
import { fileSourceNode, sourceNodeNames } from "../../sources/file_node.ts";
import { listOnce } from "../../sources/list_once.ts";
import { datapathCheck } from "../../read_side/datapath_check.ts";
import { type Rendered, renderObjects } from "../../read_side/render.ts";
import { compareMigration, formatMigration, type MigrationReport, pairsOf } from "./compare.ts";
import type { MigrateQuery } from "./flags.ts";

/**
 * Runs `migrate`; returns the exit code: 0 when nothing a client would notice changes, 1 when
 * something does (or the rules or objects cannot be read), 2 for bad input (a mode without a
 * tracer or render, no mode's rules on the node, a source without one node to act for).
 */
export async function runMigrate(q: MigrateQuery, r: CommandContext): Promise<number> {
  const fail = (code: number, text: string) => (r.stderr(`kube-proxy-deno: migrate: ${text}\n`), code);
  let rulesText: string | undefined;
  if (q.rulesFile !== undefined) {
    try {
      rulesText = await Deno.readTextFile(q.rulesFile);
    } catch (e) {
      return fail(2, `--rules: ${JSON.stringify(q.rulesFile)}: ${(e as Error).message}`);
    }
  }
  const from = q.from !== undefined ? r.modes.get(q.from)! : await programming(r, rulesText);
  if (from === undefined) {
    return fail(
      2,
      `no mode's Service rules found ${
        rulesText === undefined ? "on this node" : `in ${q.rulesFile}`
      }; name the mode that programs it with --from`,
    );
  }
  const to = r.modes.get(q.to)!;
  for (const m of [from, to]) {
    if (m.trace === undefined || m.render === undefined) {
      return fail(2, `mode "${m.name}" cannot be compared yet`);
    }
  }
  // The objects' problems are the target's to say: the current mode's would describe what changes.
  const [before, after] = [await render(r, q, from, () => false), await render(r, q, to)];
  for (const x of [before, after]) if ("error" in x) return fail(x.code, x.error);
  const [b, a] = [before as Rendered, after as Rendered];
  const pairs = pairsOf(b.renderer.explain.views(), a.renderer.explain.views());
  const asked = pairs.map((p) => ({ client: p.client, view: p.view }));
  const beforeAnswers = await datapathCheck({
    tracer: from,
    exec: r.exec,
    config: r.configFor(from.name),
    rendered: rulesText === undefined ? undefined : () => rulesText,
  })(asked);
  const afterAnswers = await datapathCheck({
    tracer: to,
    exec: r.exec,
    config: r.configFor(to.name),
    rendered: a.renderer.explain.rendered,
    answer: a.renderer.explain.answer,
  })(asked);
  const report: MigrationReport = compareMigration({
    node: a.nodeName,
    from: { mode: from.name, rules: q.rulesFile ?? "live" },
    to: { mode: to.name, rules: "rendered" },
    pairs,
    before: beforeAnswers,
    after: afterAnswers,
    beforeViews: b.renderer.explain.views(),
    advice: to.migrationAdvice,
    wide: {
      before: { traits: from.traits, liberal: r.configFor(from.name).conntrack.tcpBeLiberal },
      after: { traits: to.traits, liberal: r.configFor(to.name).conntrack.tcpBeLiberal },
    },
  });
  r.stdout(q.output === "json" ? JSON.stringify(report, null, 2) + "\n" : formatMigration(report));
  return report.groups.length === 0 ? 0 : 1;
}

/** The first mode (registry order) whose Service rules the node (or `text`) holds. */
async function programming(
  r: CommandContext,
  text: string | undefined,
): Promise<ProxyModeDefinition | undefined> {
  const source: RulesSource = text !== undefined ? { text } : { exec: r.exec, family: "IPv4" };
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
  warnAbout?: (key: string, o: object) => boolean,
) {
  const config = r.configFor(mode.name);
  let nodeName = r.nodeName;
  let load = async (handler: ModeRenderer["handler"]) => listOnce(await r.apiAccess(), nodeName, handler);
  if (config.source.kind === "file") {
    const path = config.source.path;
    let nodes: string[];
    try {
      nodes = await sourceNodeNames(path);
    } catch (e) {
      return { error: `--source: ${(e as Error).message}`, code: 1 as const };
    }
    const chosen = fileSourceNode(nodes, config.hostnameOverride);
    if ("error" in chosen) return { error: chosen.error, code: 2 as const };
    nodeName = chosen.node;
    load = (handler) => new FileSource({ path, nodeName, handler, log: r.log, strict: true }).load();
  }
  return await renderObjects({
    mode,
    config,
    log: r.log,
    nodeIPs: q.nodeIPs,
    nodeName,
    load,
    warnAbout,
  });
}
