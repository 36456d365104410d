/**
 * The read side at scale: what `trace` and `explain` cost over a node's live rules, N Services x 10
 * endpoints (bench/objects.ts), one JSON line per run, each run its own process (so its peak memory
 * is its own):
 *   deno run -A bench/trace.ts iptables|nftables|ipvs N [MAGLEV]
 * The rules are each mode's `render` of the objects, in the format the live node prints them:
 * `iptables-save`, `nft list table` (elements one a line, as nft wraps a large set), `ipvsadm -S`
 * with `ipset save`. MAGLEV Services (nftables) carry `kube-router.io/service.scheduler: mh`, each a
 * table of 16,381 slots. Reported: the listing's size, the time to parse it into what the tracer
 * walks, the walk per query (a pod and the node to 20 Services' cluster IPs, every branch and
 * Maglev slot explored as `explain` asks), and, for nftables, a whole `explain` of one Service
 * (its report over that listing, every client checked). As root, the nftables run also loads the
 * table into the kernel of a fresh network namespace and, inside it, times `nft list table` (the
 * kernel's floor for any reader) and a whole `explain` of one Service as the running proxy answers
 * it: its live rules read and traced in a worker (`deno run -A bench/trace.ts live N MAGLEV`, run
 * there by the nftables run).
 * @module
 */
import { DryRunExecutor } from "../iptables/dry_run.ts";
import { NftRuleset } from "../iptables/nft_ruleset.ts";
import { listingStatements } from "../iptables/nft_listing.ts";
import { newModeDeps } from "../proxier/mode_definition.ts";
import { MODES } from "../proxier/modes.ts";
import type { ProxyMode } from "../proxier/options/config.ts";
import { realClock } from "../proxier/runtime/clock.ts";
import { nullLogger } from "../proxier/runtime/logger.ts";
import { TABLE } from "../proxier/nftables/layout.ts";
import { traceNft } from "../proxier/trace/nft_walker.ts";
import { parseRules, tracePacket } from "../proxier/trace/iptables_walker.ts";
import type { Packet } from "../proxier/trace/packet.ts";
import { renderedIpvsState, traceIpvs } from "../proxier/ipvs/trace.ts";
import { datapathCheck } from "../proxier/read_side/datapath_check.ts";
import { explainService } from "../proxier/read_side/report.ts";
import { benchConfig, generate, peakRssMiB } from "./objects.ts";
import { DatapathWorkers } from "../proxier/read_side/datapath_workers.ts";

/** The node the rules are rendered for. */
const NODE_IP = "192.168.0.2";
/** How many Services the walk is timed on. */
const QUERIES = 20;

/** Renders `mode`'s rules for N generated Services (`maglev` of them with the mh annotation). */
async function rendered(mode: ProxyMode, n: number, maglev: number) {
  const config = benchConfig({ mode, clusterCIDRs: ["10.0.0.0/8"] });
  const dryRun = new DryRunExecutor();
  const deps = newModeDeps(config, {
    nodeName: "node-a",
    log: nullLogger,
    clock: realClock,
    exec: dryRun,
    renderNodeIPs: [NODE_IP],
  });
  const renderer = await MODES.get(mode)!.render!(deps, dryRun);
  const { services, slices } = generate(n);
  for (const s of services.slice(0, maglev)) {
    s.metadata!.annotations = { "kube-router.io/service.scheduler": "mh" };
  }
  const h = renderer.handler;
  for (const s of services) h.onServiceAdd(s);
  for (const s of slices) h.onEndpointSliceAdd(s);
  h.onServicesSynced();
  h.onEndpointSlicesSynced();
  const text = await renderer.render();
  return { renderer, text, config, services };
}

/** The packets timed: from a pod and from the node, to `QUERIES` Services spread over the set. */
function queries(services: ReturnType<typeof generate>["services"], maglev: number): Packet[] {
  const picks = maglev > 0
    ? Array.from({ length: QUERIES }, (_, i) => services[i % maglev])
    : Array.from({ length: QUERIES }, (_, i) => services[Math.floor((i * services.length) / QUERIES)]);
  return picks.flatMap((s) => [
    { src: "10.0.0.77", dst: s.spec!.clusterIP!, port: 80, protocol: "tcp" as const, fromPod: true },
    { src: NODE_IP, dst: s.spec!.clusterIP!, port: 80, protocol: "tcp" as const, fromHost: true },
  ]);
}

const ms = (t: number) => Math.round((performance.now() - t) * 10) / 10;

/**
 * Inside a fresh network namespace: loads the rendered table into the kernel, then times
 * `nft list table` and a whole `explain` of one Service as `/debug/services` answers it (the live
 * rules read and traced in a worker).
 */
async function live(n: number, maglev: number): Promise<void> {
  const { renderer, text, config, services } = await rendered("nftables", n, maglev);
  for (const tx of text.split(/^# nft -f - input.*\n/m).filter((t) => t.trim() !== "")) {
    const load = new Deno.Command("nft", { args: ["-f", "-"], stdin: "piped", stderr: "piped" }).spawn();
    const w = load.stdin.getWriter();
    await w.write(new TextEncoder().encode(tx));
    await w.close();
    const out = await load.output();
    if (!out.success) throw new Error(`nft -f: ${new TextDecoder().decode(out.stderr)}`);
  }
  let t = performance.now();
  const listed = await new Deno.Command("nft", { args: ["list", "table", "ip", TABLE], stdout: "piped" })
    .output();
  const kernelListMs = ms(t);
  const def = MODES.get("nftables")!;
  const stop = new AbortController();
  const workers = new DatapathWorkers({ signal: stop.signal, toolTimeoutMs: 60_000, deadlineMs: 120_000 });
  t = performance.now();
  const report = await explainService(
    {
      mode: def,
      node: "node-a",
      rules: "live",
      views: renderer.explain.views(),
      check: workers.check({ tracer: def, config }),
    },
    `bench/${services[0].metadata!.name}`,
  );
  const liveExplainMs = ms(t);
  if (report === undefined || report.disagreements !== 0) {
    throw new Error(
      `live explain: ${report === undefined ? "no report" : JSON.stringify(report.ports[0].clients)}`,
    );
  }
  console.log(
    JSON.stringify({
      liveListingMiB: Math.round(listed.stdout.length / 2 ** 20 * 10) / 10,
      kernelListMs,
      liveExplainMs,
    }),
  );
}

/** Runs {@linkcode live} in a fresh network namespace; returns its figures. */
async function inNamespace(n: number, maglev: number): Promise<Record<string, unknown>> {
  const ns = `kpd-${crypto.randomUUID().slice(0, 8)}-trace`;
  const run = (args: string[]) =>
    new Deno.Command("ip", { args, stdout: "piped", stderr: "inherit" }).output();
  await run(["netns", "add", ns]);
  try {
    const r = await run([
      "netns",
      "exec",
      ns,
      Deno.execPath(),
      "run",
      "-A",
      new URL(import.meta.url).pathname,
      "live",
      String(n),
      String(maglev),
    ]);
    const line = new TextDecoder().decode(r.stdout).split("\n").find((l) => l.startsWith("{"));
    return line === undefined ? { liveExplainMs: "failed" } : JSON.parse(line);
  } finally {
    await run(["netns", "del", ns]);
  }
}

if (import.meta.main && Deno.args[0] === "live") {
  await live(Number(Deno.args[1]), Number(Deno.args[2] ?? "0"));
} else if (import.meta.main) {
  const [mode, nText, maglevText] = Deno.args as [ProxyMode, string, string | undefined];
  const n = Number(nText ?? "1000");
  const maglev = Number(maglevText ?? "0");
  const { renderer, text, config, services } = await rendered(mode, n, maglev);
  const packets = queries(services, maglev);
  let listing: string;
  let parse: () => (p: Packet) => unknown;
  if (mode === "nftables") {
    // As `nft list table` prints the table the render's transactions build.
    const kernel = new NftRuleset();
    kernel.apply(text);
    listing = kernel.listTable("IPv4", TABLE);
    parse = () => {
      const r = new NftRuleset();
      r.apply(listingStatements(listing).join("\n"));
      return (p) => traceNft(r, "IPv4", TABLE, p, [NODE_IP], { exploreHashes: true });
    };
  } else if (mode === "iptables") {
    listing = text.slice(0, text.indexOf("# ip6tables-restore") >>> 0);
    parse = () => {
      const rules = parseRules(listing);
      return (p) => tracePacket(rules, p, [NODE_IP]);
    };
  } else {
    listing = text;
    parse = () => {
      const state = renderedIpvsState(listing, "IPv4");
      return (p) => traceIpvs(state, p, [NODE_IP]);
    };
  }
  let t = performance.now();
  const walk = parse();
  const parseMs = ms(t);
  t = performance.now();
  for (const p of packets) walk(p);
  const walkMs = Math.round(((performance.now() - t) / packets.length) * 100) / 100;
  let explainMs: number | undefined;
  if (mode === "nftables") {
    // A whole explain of one Service, its datapath read from the live-format listing.
    const def = MODES.get(mode)!;
    t = performance.now();
    const report = await explainService(
      {
        mode: def,
        node: "node-a",
        rules: "rendered",
        views: renderer.explain.views(),
        check: datapathCheck({ tracer: def, exec: new DryRunExecutor(), config, rendered: () => listing }),
      },
      `bench/${services[0].metadata!.name}`,
    );
    explainMs = ms(t);
    if (report === undefined || report.disagreements !== 0) {
      throw new Error(`explain over the listing: ${report === undefined ? "no report" : "disagreements"}`);
    }
  }
  const peak = Math.round(peakRssMiB());
  const kernel = mode === "nftables" && Deno.uid() === 0 ? await inNamespace(n, maglev) : {};
  console.log(JSON.stringify({
    mode,
    services: n,
    maglev,
    listingMiB: Math.round((listing.length / 2 ** 20) * 10) / 10,
    parseMs,
    walkMsPerQuery: walkMs,
    explainMs,
    peakRssMiB: peak,
    ...kernel,
  }));
}
