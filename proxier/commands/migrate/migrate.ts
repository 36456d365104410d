/**
 * `kube-proxy-deno migrate --to=MODE`: what moving this node to another mode (or configuration)
 * would change for each Service's clients, before it happens. It reads what programs the node now
 * (the live rules of this program's or upstream's mode, or a saved listing, `--rules`), renders the
 * target for the same objects (the file source's, or the API's listed once), asks both datapaths
 * about every client `explain` knows, and prints what differs, grouped by cause (`compare.ts`).
 * Touches nothing on the node.
 * @module
 */
import type { Executor } from "../../../iptables/executor.ts";
import type { ModeRenderer, ProxyModeDefinition } from "../../mode_definition.ts";
import type { ProxyConfig, ProxyMode } from "../../options/config.ts";
import type { Logger } from "../../runtime/logger.ts";
import type { RulesSource } from "../../trace/packet.ts";
import { FileSource, sourceNodeNames } from "../../sources/file.ts";
import { datapathCheck } from "../explain/check.ts";
import { type Rendered, renderObjects } from "../render/render.ts";
import { compareMigration, formatMigration, type MigrationReport, pairsOf } from "./compare.ts";

/** What `migrate` is asked (its command line: `cli/migrate_flags.ts`). */
export interface MigrateQuery {
  readonly to: ProxyMode;
  /** The mode programming the node now; undefined: the first whose rules are found. */
  readonly from?: ProxyMode;
  /** A saved listing of the node's rules (iptables-save, nft list ruleset...) instead of the live ones. */
  readonly rulesFile?: string;
  readonly nodeIPs?: readonly string[];
  readonly output: "text" | "json";
}

/** What {@linkcode runMigrate} is given. */
export interface MigrateRun {
  readonly modes: ReadonlyMap<ProxyMode, ProxyModeDefinition>;
  readonly query: MigrateQuery;
  /** The configuration as the command line gives it, for `mode` (its platform defaults applied). */
  readonly configFor: (mode: ProxyMode) => ProxyConfig;
  /** The API's objects, listed once, for the API source. */
  readonly listApi: (nodeName: string, handler: ModeRenderer["handler"]) => Promise<void>;
  readonly nodeName: string;
  readonly exec: Executor;
  readonly log: Logger;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/**
 * Runs `migrate`; returns the exit code: 0 when nothing a client would notice changes, 1 when
 * something does (or the rules or objects cannot be read), 2 for bad input (a mode without a
 * tracer or render, no mode's rules on the node, a source without one node to act for).
 */
export async function runMigrate(r: MigrateRun): Promise<number> {
  const fail = (code: number, text: string) => (r.stderr(`kube-proxy-deno: migrate: ${text}\n`), code);
  const q = r.query;
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
  const [before, after] = [await render(r, from, () => false), await render(r, to)];
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
  r: MigrateRun,
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
  r: MigrateRun,
  mode: ProxyModeDefinition,
  warnAbout?: (key: string, o: object) => boolean,
) {
  const config = r.configFor(mode.name);
  let nodeName = r.nodeName;
  let load = (handler: ModeRenderer["handler"]) => r.listApi(nodeName, handler);
  if (config.source.kind === "file") {
    const path = config.source.path;
    if (config.hostnameOverride === "") {
      let nodes: string[];
      try {
        nodes = await sourceNodeNames(path);
      } catch (e) {
        return { error: `--source: ${(e as Error).message}`, code: 1 as const };
      }
      if (nodes.length !== 1) {
        return {
          error: `--hostname-override: the source defines ${nodes.length} Nodes; name the node to act for`,
          code: 2 as const,
        };
      }
      nodeName = nodes[0];
    }
    load = (handler) => new FileSource({ path, nodeName, handler, log: r.log, strict: true }).load();
  }
  return await renderObjects({
    mode,
    config,
    log: r.log,
    nodeIPs: r.query.nodeIPs,
    nodeName,
    load,
    warnAbout,
  });
}
