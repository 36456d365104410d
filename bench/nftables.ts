/**
 * nftables mode at scale, N services x 10 endpoints (bench/objects.ts), one JSON line per run:
 *   deno run -A bench/nftables.ts build N            our work only (dry run): full build, size,
 *                                                     one-endpoint partial builds, peak RSS
 *   deno run -A bench/nftables.ts kernel N           the real proxier on the real nft in a fresh
 *                                                     network namespace: full sync, one-endpoint
 *                                                     changes from the event to the kernel
 *   deno run -A bench/nftables.ts upstream N T       load time of upstream's layout (a chain per
 *                                                     service and per endpoint) for the same
 *                                                     objects, stopped after T seconds
 * @module
 */
import { DryRunExecutor } from "../iptables/dry_run.ts";
import type { ExecOptions, ExecResult, Executor } from "../iptables/executor.ts";
import { LAYOUT_MARKER, TABLE } from "../proxier/nftables/layout.ts";
import { NftablesProxier } from "../proxier/nftables/proxier.ts";
import { withNamespace } from "../tests/support/namespace.ts";
import { benchNftablesProxier } from "./nftables_proxier.ts";
import { feedGenerated, generate, peakRssMiB, slice } from "./objects.ts";

/**
 * A dry run whose kernel holds our table after the first sync, so that later syncs stay partial
 * (a plain dry run reports no table, and the proxier would recreate it every time).
 */
class TableKeepingDryRun extends DryRunExecutor {
  override run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    if (cmd === "nft" && opts.args.join(" ") === "-j list chains ip" && this.commands.length > 0) {
      const chain = { family: "ip", table: TABLE, name: LAYOUT_MARKER };
      return Promise.resolve({ code: 0, stdout: JSON.stringify({ nftables: [{ chain }] }), stderr: "" });
    }
    return super.run(cmd, opts);
  }
}

/** A proxier over `exec`, fed N services and synced once; returns it and the full sync's time. */
async function loaded(
  n: number,
  exec: Executor,
): Promise<{ p: NftablesProxier; fullMs: number; eventsMs: number }> {
  const p = benchNftablesProxier(exec);
  const eventsMs = feedGenerated(p, n);
  const t = performance.now();
  await p.syncNow();
  return { p, fullMs: performance.now() - t, eventsMs };
}

/** Times `rounds` one-endpoint changes, each from the event until the sync (and kernel) is done. */
async function changes(p: NftablesProxier, n: number, rounds: number): Promise<number[]> {
  const out: number[] = [];
  for (let g = 1; g <= rounds; g++) {
    const i = Math.floor(n / 2) + g;
    const t = performance.now();
    p.onEndpointSliceUpdate(slice(`svc-${i}`, i, 0), slice(`svc-${i}`, i, g));
    await p.syncNow();
    out.push(performance.now() - t);
  }
  return out.sort((a, b) => a - b);
}

/** Upstream's layout for the same objects: a chain per service and per endpoint, numgen vmaps. */
export function upstreamLayout(n: number): string {
  const { services, slices } = generate(n);
  const t = "ip kube-proxy";
  const out = [
    `add table ${t}`,
    `add chain ${t} nat-prerouting { type nat hook prerouting priority dstnat; policy accept; }`,
    `add chain ${t} nat-output { type nat hook output priority -100; policy accept; }`,
    `add chain ${t} nat-postrouting { type nat hook postrouting priority srcnat; policy accept; }`,
    `add chain ${t} services`,
    `add chain ${t} mark-for-masquerade`,
    `add chain ${t} masquerading`,
    `add rule ${t} mark-for-masquerade meta mark set meta mark | 0x00004000`,
    `add rule ${t} masquerading meta mark & 0x00004000 == 0x00000000 return`,
    `add rule ${t} masquerading meta mark set meta mark ^ 0x00004000`,
    `add rule ${t} masquerading masquerade fully-random`,
    `add map ${t} service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }`,
    `add set ${t} cluster-ips { type ipv4_addr; }`,
    `add rule ${t} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    `add rule ${t} nat-prerouting jump services`,
    `add rule ${t} nat-output jump services`,
    `add rule ${t} nat-postrouting jump masquerading`,
  ];
  const hash = (s: string) => {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
    return (h >>> 0).toString(36).toUpperCase().padStart(8, "0").slice(0, 8);
  };
  services.forEach((svc, i) => {
    const name = svc.metadata!.name!;
    const ip = svc.spec!.clusterIP!;
    const base = `bench/${name}/tcp/http`;
    const chain = `service-${hash(base)}-${base}`;
    const eps = slices[i].endpoints!.map((e) => e.addresses[0]);
    const epChains = eps.map((e) => `endpoint-${hash(base + e)}-${base}__${e}/8080`);
    out.push(`add chain ${t} ${chain}`);
    for (const [k, e] of eps.entries()) {
      out.push(`add chain ${t} ${epChains[k]}`);
      out.push(`add rule ${t} ${epChains[k]} ip saddr ${e} jump mark-for-masquerade`);
      out.push(`add rule ${t} ${epChains[k]} meta l4proto tcp dnat to ${e}:8080`);
    }
    out.push(
      `add rule ${t} ${chain} ip daddr ${ip} tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade`,
    );
    out.push(
      `add rule ${t} ${chain} numgen random mod ${eps.length} vmap { ${
        epChains.map((c, k) => `${k} : goto ${c}`).join(", ")
      } }`,
    );
    out.push(`add element ${t} service-ips { ${ip} . tcp . 80 : goto ${chain} }`);
    out.push(`add element ${t} cluster-ips { ${ip} }`);
  });
  return out.join("\n") + "\n";
}

/** Loads `text` with `nft -f -` into a fresh namespace; seconds, or why it did not finish. */
async function load(text: string, timeoutS: number): Promise<number | string> {
  return await withNamespace(async (exec) => {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), timeoutS * 1000);
    const t = performance.now();
    try {
      const r = await exec.run("nft", { args: ["-f", "-"], stdin: text, signal: ac.signal });
      if (r.code !== 0) {
        return ac.signal.aborted ? `> ${timeoutS} s (stopped)` : `failed: ${r.stderr.slice(0, 200)}`;
      }
      return (performance.now() - t) / 1000;
    } catch {
      return `> ${timeoutS} s (stopped)`;
    } finally {
      clearTimeout(timer);
    }
  });
}

const round = (x: number, d = 1) => Number(x.toFixed(d));

if (import.meta.main) {
  const [what, nText, timeoutText] = Deno.args;
  const n = Number(nText ?? "1000");
  if (what === "build") {
    const dry = new TableKeepingDryRun();
    const { p, fullMs, eventsMs } = await loaded(n, dry);
    const full = dry.lastInput("nft")!;
    const partial = await changes(p, n, 5);
    const partialText = dry.lastInput("nft")!;
    console.log(JSON.stringify({
      services: n,
      eventsMs: Math.round(eventsMs),
      buildMs: Math.round(fullMs),
      lines: full.split("\n").length - 1,
      bytes: full.length,
      partialMs: round(partial[2]),
      partialLines: partialText.split("\n").length - 1,
      peakRssMiB: Math.round(peakRssMiB()),
    }));
    // The build's transaction, loaded into a fresh namespace by itself: the kernel's share.
    if (Deno.uid() === 0) {
      const kernelS = await load(full, Number(timeoutText ?? "120"));
      console.log(JSON.stringify({ kernelLoadS: typeof kernelS === "number" ? round(kernelS, 2) : kernelS }));
    }
  } else if (what === "kernel") {
    await withNamespace(async (exec) => {
      const { p, fullMs } = await loaded(n, exec);
      const e2e = await changes(p, n, 10);
      // The thorough drift check a periodic sync runs (median of 5); it must find nothing here.
      const drift: number[] = [];
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        const found = await p.checkDrift();
        drift.push(performance.now() - t);
        if (found !== undefined) throw new Error(`drift where there is none: ${found}`);
      }
      console.log(JSON.stringify({
        services: n,
        fullSyncS: round(fullMs / 1000, 2),
        changeMedianMs: round(e2e[Math.floor(e2e.length / 2)]),
        changeMaxMs: round(e2e.at(-1)!),
        driftCheckMs: round(drift.sort((a, b) => a - b)[2]),
        peakRssMiB: Math.round(peakRssMiB()),
      }));
    });
  } else if (what === "upstream") {
    const s = await load(upstreamLayout(n), Number(timeoutText ?? "300"));
    console.log(JSON.stringify({ services: n, upstreamLoadS: typeof s === "number" ? round(s, 2) : s }));
  } else {
    console.error("usage: bench/nftables.ts build|kernel|upstream N [TIMEOUT_S]");
    Deno.exit(2);
  }
}
