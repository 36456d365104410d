/**
 * `deno task bench`: prints every benchmark's figures with their conditions.
 * Usage: deno task bench [userspace] [iptables] [nftables] [maglev] [ipvs] [trace] [conntrack] [npl] [memory] [scale] [cold]
 * [chaos] [soak] (default: all but memory, scale, cold, chaos and soak). `cold` compares the cold starts of checkouts
 * (`cold_starts.ts`: COLD_ROOTS, COLD_ROUNDS, COLD_SIZE, COLD_STACK). `scale` runs the real program against the test API server at
 * SCALE_SIZES (default 5000x50,50000x1,50000x10; SCALE_CHANGES changes each, default 110; SCALE_MODES
 * default nftables; iptables and iptables-legacy run at up to 5000x50). `npl` runs the real program for minutes per size; NPL_SPREAD=SECONDS
 * shortens each run. `chaos` runs the fault schedule for 10 minutes per kernel mode, ipvs in the
 * VM (CHAOS_SECONDS, CHAOS_SEED, CHAOS_MODES=iptables,iptables-legacy,nftables,ipvs change it). `soak` runs the
 * real program for an hour per mode at 10,000 Services, ipvs at 1,000 in the VM (SOAK_SECONDS,
 * SOAK_SERVICES, SOAK_IPVS_SERVICES, SOAK_INTERVAL, SOAK_MODES=iptables,nftables,ipvs;
 * SOAK_PARALLEL=1 runs the modes at once).
 * @module
 */
import { machineCosts, machineCostsLine } from "./machine_costs.ts";
import { benchNpl, type NplOptions } from "./npl.ts";
import { benchUserspace } from "./userspace.ts";
import { SETTLE_MS, type UserspaceLoadResult, type WrkFigures } from "./userspace_load.ts";
import { onPath } from "../proxier/runtime/kernel_tools.ts";
import { benchChaos } from "./chaos.ts";
import { benchSoak, type MemoryBreakdown } from "./soak.ts";
import { type Chart, lineChart } from "./chart.ts";
import { benchScale, type ScaleResult } from "./scale.ts";
import { meanFaults, type StartCpu, startCpuHeader, startCpuRow } from "./start_cpu.ts";
import { againstFirst, benchColdStarts } from "./cold_starts.ts";

const which = new Set(
  Deno.args.length > 0
    ? Deno.args
    : ["userspace", "iptables", "nftables", "maglev", "ipvs", "trace", "conntrack", "npl"],
);

/** Runs a bench program in its own process (so peak memory is its own); returns its JSON lines merged. */
async function child(file: string, args: string[]): Promise<Record<string, unknown>> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(file, import.meta.url).pathname, ...args],
    stderr: "inherit",
  }).output();
  const lines = new TextDecoder().decode(r.stdout).split("\n").filter((l) => l.startsWith("{"));
  return Object.assign({}, ...lines.map((l) => JSON.parse(l)));
}
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(s + "\n"));
type Point = readonly [number, number];
/** Writes `c` (its series without points left out) as bench/charts/`file` and says so. */
async function chart(file: string, c: Chart): Promise<void> {
  const series = c.series.filter((x) => x.points.length > 0);
  if (series.length === 0) return;
  const dir = new URL("./charts/", import.meta.url);
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(new URL(file, dir), lineChart({ ...c, series }));
  out(`Chart: bench/charts/${file}`);
}
out(
  `# kube-proxy-deno benchmarks: deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores, ${Deno.build.target}`,
);

if (which.has("userspace")) {
  const r = await benchUserspace();
  out(
    `\n## userspace datapath, loopback, 1 stream of ${
      r.bytes / 2 ** 20
    } MiB (median of 5, alternating; min-max in brackets), ${r.connections} sequential connections`,
  );
  out(`| path | throughput MB/s | connections/s |`);
  out(`| --- | ---: | ---: |`);
  out(
    `| direct | ${r.directMBps.toFixed(0)} [${r.directRange.map((x) => x.toFixed(0)).join("-")}] | ${
      r.directConnPerSec.toFixed(0)
    } |`,
  );
  out(
    `| through proxy | ${r.proxyMBps.toFixed(0)} [${r.proxyRange.map((x) => x.toFixed(0)).join("-")}] | ${
      r.proxyConnPerSec.toFixed(0)
    } |`,
  );
  out(
    `| ratio | ${(100 * r.proxyMBps / r.directMBps).toFixed(0)}% | ${
      (100 * r.proxyConnPerSec / r.directConnPerSec).toFixed(0)
    }% |`,
  );
}

if (which.has("userspace") && await onPath("wrk", Deno.env.get("PATH"))) {
  const r = await child("./userspace_load.ts", ["10"]) as unknown as UserspaceLoadResult;
  out(
    `\n## userspace mode under load: the real program (start task's flags, file source, no portals) on ` +
      `loopback, one HTTP backend (Deno.serve) behind a NodePort; wrk -t2, ${r.seconds} s per run, direct ` +
      `to the backend then through the proxy; client, proxy and backend share the ${navigator.hardwareConcurrency} cores. ` +
      `Proxy fds / RSS: before the run, peak, ${
        SETTLE_MS / 1000
      } s after it (idle at start: ${r.idle.fds} fds, ` +
      `${r.idle.rssMiB} MiB).`,
  );
  out(
    "| load | direct req/s | proxy req/s | ratio | direct p50 / p99 | proxy p50 / p99 | proxy errors | proxy fds before / peak / after | proxy RSS MiB before / peak / after |",
  );
  out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  const ms = (x: number) => x >= 100 ? x.toFixed(0) : x.toFixed(1);
  const errs = (w: WrkFigures) => Object.values(w.errors).reduce((a, b) => a + b, 0);
  for (
    const [name, run] of [
      ["keep-alive, 50 connections", r.keepAlive],
      ["new connection per request, 50 at once", r.newConnections],
      ["keep-alive, 1,000 connections", r.c1000],
      ["keep-alive, 5,000 connections", r.c5000],
    ] as const
  ) {
    out(
      `| ${name} | ${run.direct.requestsPerSec.toFixed(0)} | ${run.proxy.requestsPerSec.toFixed(0)} | ${
        (100 * run.proxy.requestsPerSec / run.direct.requestsPerSec).toFixed(0)
      }% | ${ms(run.direct.p50Ms)} / ${ms(run.direct.p99Ms)} ms | ${ms(run.proxy.p50Ms)} / ${
        ms(run.proxy.p99Ms)
      } ms | ${errs(run.proxy)} (direct ${
        errs(run.direct)
      }) | ${run.before.fds} / ${run.peak.fds} / ${run.after.fds} | ${run.before.rssMiB} / ${run.peak.rssMiB} / ${run.after.rssMiB} |`,
    );
  }
  out(
    "\nUDP: 100 client sockets, 64-byte datagrams for 5 s, echoed by the backend; loss = datagrams not echoed back.",
  );
  out("| datagrams/s | direct loss | proxy loss |");
  out("| ---: | ---: | ---: |");
  const loss = (x: { sent: number; received: number }) => `${(100 * (1 - x.received / x.sent)).toFixed(2)}%`;
  for (const u of r.udp) out(`| ${u.rate} | ${loss(u.direct)} | ${loss(u.proxy)} |`);
} else if (which.has("userspace")) {
  out("\n(userspace load benchmark skipped: wrk is not installed; apt-get install wrk)");
}

if (which.has("iptables")) {
  // Each size runs in its own process, so peak memory is per size. The kernel load is capped:
  // iptables-restore time grows faster than the rule count (nf_tables backend).
  const sizes: Array<[number, number]> = [[1000, 300], [10_000, 300], [50_000, 0]];
  out(`\n## iptables mode, N services x 10 endpoints, ClusterIP, one generator for all sizes`);
  out(
    "| services | build full restore input | lines | MiB | partial sync, 1 endpoint change (our work) | partial input lines | iptables-restore into a fresh netns | drift check's kernel reads (periodic syncs) | peak RSS MiB |",
  );
  out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const [n, kernelTimeout] of sizes) {
    const r = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("./iptables.ts", import.meta.url).pathname,
        String(n),
        String(kernelTimeout),
      ],
      stderr: "inherit",
    }).output();
    const j = JSON.parse(new TextDecoder().decode(r.stdout));
    const kernel = typeof j.kernelRestoreS === "number" ? `${j.kernelRestoreS} s` : j.kernelRestoreS;
    out(
      `| ${n} | ${j.buildMs} ms | ${j.lines} | ${
        (j.bytes / 2 ** 20).toFixed(1)
      } | ${j.partialMs} ms | ${j.partialLines} | ${kernel} | ${
        typeof j.driftCheckMs === "number" ? `${j.driftCheckMs} ms` : j.driftCheckMs
      } | ${j.peakRssMiB} |`,
    );
  }
}

if (which.has("ipvs")) {
  out(
    `\n## ipvs mode, N services x 10 endpoints (same generator); our work on a dry run (an empty kernel); ` +
      `kernel: the full sync's batches applied with the real tools in the VM (tests/vm/run.sh: qemu software ` +
      `emulation, 1 vCPU, Linux 6.1), a fresh network namespace`,
  );
  out(
    "| services | full sync (our work) | ipvsadm / ipset / ip / iptables lines | partial sync, 1 endpoint change | partial batch lines | peak RSS MiB | kernel: ipvsadm -R / ipset / ip / iptables-restore (VM) |",
  );
  out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const n of [1000, 10_000]) {
    const dir = await Deno.makeTempDir({ prefix: "kpd-bench-ipvs-" });
    try {
      const b = await child("./ipvs.ts", ["build", String(n), dir]);
      let kernel = "not run (no qemu)";
      if (n === 10_000 && await onPath("qemu-system-x86_64", Deno.env.get("PATH"))) {
        const r = await new Deno.Command(new URL("../tests/vm/run.sh", import.meta.url).pathname, {
          args: [
            "--mem",
            "2048",
            "--",
            Deno.execPath(),
            "run",
            "-A",
            new URL("./ipvs.ts", import.meta.url).pathname,
            "kernel",
            dir,
          ],
          stderr: "inherit",
        }).output();
        const line = new TextDecoder().decode(r.stdout).split("\n").find((l) => l.startsWith("{"));
        const k = line === undefined ? undefined : JSON.parse(line);
        kernel = k === undefined
          ? `failed (exit ${r.code})`
          : `${k.ipvsadmS} / ${k.ipsetS} / ${k.ipS} / ${k.iptablesS} s`;
      } else if (n !== 10_000) kernel = "-";
      out(
        `| ${n} | ${b.buildMs} ms | ${b.ipvsadmLines} / ${b.ipsetLines} / ${b.ipLines} / ${b.iptablesLines} | ${b.partialMs} ms | ${b.partialLines} | ${b.peakRssMiB} | ${kernel} |`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
}

if (which.has("maglev")) {
  out(
    "\n## Maglev (nftables, `kube-router.io/service.scheduler: mh`), 10,000 random flows (source address and " +
      "port) to a Service of N endpoints, each walked through each node's rules by the nftables tracer " +
      "(jhash as the kernel computes it). Agree: two nodes with the same objects (endpoints listed in " +
      "opposite orders) send a flow to the same endpoint. Moved: flows whose endpoint changes when one " +
      "endpoint is removed (a partial sync). The paper's reference: only the removed endpoint's 1/N must " +
      "move; the bound asked is 1/N + 2%. sh hashes onto the sorted endpoint list; random draws anew.",
  );
  out("| N | M | agree: mh / sh / random | moved: mh / sh / random | 1/N + 2% | mh within |");
  out("| ---: | ---: | ---: | ---: | ---: | :---: |");
  for (const m of [1021, 16381]) {
    for (const n of [3, 10, 100]) {
      const r = await child("./maglev.ts", ["flows", String(n), String(m)]);
      out(
        `| ${n} | ${m} | ${r.mhAgreePct}% / ${r.shAgreePct}% / ${r.randomAgreePct}% | ${r.mhMovedPct}% / ${r.shMovedPct}% / ${r.randomMovedPct}% | ${r.boundPct}% | ${
          Number(r.mhMovedPct) <= Number(r.boundPct) ? "yes" : "no"
        } |`,
      );
    }
  }
  out("\nTable build (our work, once per endpoint change) and the kernel's elements per table:");
  out("| M | N | build ms | elements per table |");
  out("| ---: | ---: | ---: | ---: |");
  for (const m of [1021, 16381]) {
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./maglev.ts", import.meta.url).pathname, "build", String(m)],
    }).output();
    for (const line of new TextDecoder().decode(r.stdout).split("\n").filter((l) => l.startsWith("{"))) {
      const b = JSON.parse(line);
      out(`| ${m} | ${b.endpoints} | ${b.buildMs} | ${m} |`);
    }
  }
  if (Deno.uid() === 0) {
    out(
      "\nFull sync of 10,000 Services x 10 endpoints with 1% of them Maglev (100 tables), the real proxier on " +
        "the real nft in a fresh namespace (new tables go in transactions of their own, up to 65,536 elements " +
        "each); nft -f of the same: those transactions loaded by nft alone into another fresh namespace (the " +
        "kernel's floor); change: one endpoint of a Maglev Service replaced, event to kernel; nft peak: the " +
        "largest nft process over that first sync's transactions:",
    );
    out(
      "| M | Maglev elements | transactions | full sync | nft -f of the same (floor) | change to kernel | nft peak MiB |",
    );
    out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const m of [0, 1021, 16381]) {
      const k = await child("./maglev.ts", ["kernel", "10000", String(m)]);
      out(
        `| ${
          m === 0 ? "none (no Maglev)" : m
        } | ${k.maglevElements} | ${k.transactions} | ${k.fullSyncS} s | ${k.nftFloorS} s | ${k.changeMs} ms | ${
          k.nftPeakMiB ?? "-"
        } |`,
      );
    }
  }
}

if (which.has("trace")) {
  out(
    "\n## trace and explain over live-format rules, N Services x 10 endpoints (bench/trace.ts): the listing " +
      "as the node prints it (iptables-save; nft list table, a large set over many lines; ipvsadm -S with " +
      "ipset save), parsed once into what the tracer walks, then 40 queries (a pod and the node to 20 " +
      "Services, every random branch and hash slot explored as explain asks). Maglev: that many Services " +
      "annotated mh, a table of 16,381 slots each (nftables only). Explain: a whole report on one Service " +
      "over the listing (our work); live: the table loaded into a fresh namespace's kernel and the report " +
      "answered as /debug/services does (the rules read by nft and traced in a worker), beside `nft list " +
      "table` alone (nft's own floor for any reader of the live table).",
  );
  out(
    "| format | services | Maglev | listing MiB | parse | walk per query | explain (our work) | live explain | nft list table (floor) | peak RSS MiB |",
  );
  out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  const runs: Array<[string, number, number]> = [];
  for (const n of [1000, 10_000, 50_000]) {
    runs.push(["iptables", n, 0], ["ipvs", n, 0], ["nftables", n, 0], ["nftables", n, 10]);
  }
  const v = (x: unknown, unit: string) => x === undefined ? "-" : `${x} ${unit}`;
  for (const [mode, n, maglev] of runs) {
    const r = await child("./trace.ts", [mode, String(n), String(maglev)]);
    out(
      `| ${
        mode === "iptables" ? "iptables-save" : mode === "ipvs" ? "ipvsadm -S, ipset save" : "nft list table"
      } | ${n} | ${maglev} | ${r.listingMiB} | ${r.parseMs} ms | ${r.walkMsPerQuery} ms | ${
        v(r.explainMs, "ms")
      } | ${v(r.liveExplainMs, "ms")} | ${v(r.kernelListMs, "ms")} | ${r.peakRssMiB} |`,
    );
  }
}

if (which.has("conntrack")) {
  const c = await child("./conntrack.ts", ["10000"]);
  out(
    `\n## conntrack reconciler, ${c.flows} UDP flows (${c.services} UDP Services x 10 endpoints, one flow each) ` +
      `in a fresh network namespace's table; time per sync (listing, deciding, one conntrack -R batch)`,
  );
  out("| case | time | flows deleted |");
  out("| --- | ---: | ---: |");
  out(`| kernel floor: conntrack -L of the table alone | ${c.listFloorMs} ms | - |`);
  out(`| reconcile, nothing stale (median of 5) | ${c.reconcileNothingStaleMs} ms | 0 |`);
  out(`| reconcile, one endpoint of one Service gone | ${c.reconcileOneStaleMs} ms | ${c.deletedOne} |`);
  out(`| reconcile, one endpoint of each of 100 Services gone | ${c.reconcileStaleMs} ms | ${c.deleted} |`);
}

if (which.has("soak")) {
  const services = Number(Deno.env.get("SOAK_SERVICES") ?? "10000");
  const ipvsServices = Number(Deno.env.get("SOAK_IPVS_SERVICES") ?? "1000");
  const seconds = Number(Deno.env.get("SOAK_SECONDS") ?? "3600");
  const intervalSeconds = Number(Deno.env.get("SOAK_INTERVAL") ?? "300");
  const parallel = Deno.env.get("SOAK_PARALLEL") === "1";
  const modes = (Deno.env.get("SOAK_MODES") ?? "iptables,nftables,ipvs").split(",") as Array<
    "iptables" | "nftables" | "ipvs"
  >;
  const soak = (mode: typeof modes[number]) =>
    benchSoak(
      { mode, services: mode === "ipvs" ? ipvsServices : services, seconds, intervalSeconds },
      (s) => console.error(`soak ${mode}`, JSON.stringify(s)),
    );
  const results = [];
  if (parallel) results.push(...await Promise.all(modes.map(soak)));
  else for (const mode of modes) results.push(await soak(mode));
  for (const r of results) {
    const where = r.mode === "iptables"
      ? " (nf_tables backend)"
      : r.mode === "ipvs"
      ? " (in the VM: emulated CPU, 10-20x slower)"
      : "";
    out(
      `\n## soak, ${r.mode} mode${where}: ${r.services} Services x 10 endpoints for ${+(r.seconds / 60)
        .toFixed(1)} min${
        parallel ? ` (${modes.join(", ")} at once, 2 cores)` : ""
      }, 10 one-endpoint changes/s, ` +
        `a Service added and one removed every 5 s; first sync ${r.firstSyncS} s`,
    );
    out(
      "| minute | RSS median / max MiB | anonymous MiB (V8 pages / malloc main) | V8 heap used min / max MiB | V8 heap total MiB | external MiB | fds | timers | NPL median / max (program's histogram) | changes |",
    );
    out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const s of r.samples) {
      out(
        `| ${s.minute} | ${s.rssMiB} / ${s.rssMaxMiB} | ${s.anonMiB} (${s.v8PagesMiB} / ${s.mallocMainMiB}) | ${s.heapUsedMinMiB} / ${s.heapUsedMaxMiB} | ${s.heapTotalMiB} | ${s.externalMiB} | ${s.fds} | ${s.timers} | ≤ ${s.nplMedianS} / ≤ ${s.nplMaxS} s | ${s.changes} |`,
      );
    }
    const at10 = r.samples.find((s) => s.minute >= 10) ?? r.samples[0];
    const last = r.samples.at(-1);
    if (at10 !== undefined && last !== undefined) {
      const growth = (last.rssMiB / at10.rssMiB - 1) * 100;
      out(
        `RSS (interval median) at the end vs after 10 min: ${growth >= 0 ? "+" : ""}${
          growth.toFixed(1)
        }% (target within 10%); ` +
          `fds ${at10.fds} -> ${last.fds}, timers ${at10.timers} -> ${last.timers}`,
      );
    }
  }
}

if (which.has("memory")) {
  // Upstream kube-proxy 1.36.2 built as its releases are (-s -w; tags selinux,notest,grpcnotrace),
  // measured on this machine against a real kube-apiserver 1.36, same objects, 10 one-endpoint
  // changes (after the first sync / after the changes / peak, MiB).
  const upstream: Record<string, readonly [number, number, number]> = {
    "nftables 1000": [64.5, 86.4, 90.5],
    "iptables 1000": [72.4, 89.2, 89.2],
  };
  const measured: Array<{ mode: string; services: number; figures: readonly [number, number, number] }> = [];
  const sizes = (Deno.env.get("MEMORY_SIZES") ?? "1000,5000,10000").split(",").map(Number);
  const modes = (Deno.env.get("MEMORY_MODES") ?? "nftables,iptables,userspace").split(",");
  out(
    `\n## memory: the real program (the start task's command and permissions, run from its own copy of the Deno ` +
      `binary as the compiled program runs from its own file) in a network namespace, fed by the test API server: ` +
      `N Services x 10 endpoints (one EndpointSlice each), then 60 one-endpoint changes 1 s apart`,
  );
  out(
    "| mode | services | RSS after first sync / after the changes / peak, MiB | upstream 1.36.2 release build | " +
      "first sync s / CPU s | changes CPU s | after first sync: files / V8 pages (heap used of total) / code / " +
      "external / malloc main / other anon | after the changes: the same |",
  );
  out("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |");
  const parts = (m: MemoryBreakdown) =>
    `${m.files} / ${m.v8Pages} (${m.heapUsed} of ${m.heapTotal}) / ${m.code} / ${m.external} / ${m.mallocMain} / ${m.otherAnon}`;
  for (const mode of modes as Array<"nftables" | "iptables" | "userspace">) {
    for (const services of mode === "userspace" ? sizes.filter((n) => n <= 1000) : sizes) {
      const r = await benchSoak({
        mode,
        services,
        seconds: 60,
        intervalSeconds: 60,
        changesPerSecond: 1,
        serviceChurn: false,
      });
      const theirs = upstream[`${mode} ${services}`];
      out(
        `| ${mode} | ${services} | ${r.firstSyncRssMiB} / ${r.endRssMiB} / ${r.peakRssMiB} | ${
          theirs?.join(" / ") ?? "-"
        } | ${r.firstSyncS} / ${r.firstSyncCpuS} | ${r.changesCpuS} | ${parts(r.firstSyncMemory)} | ${
          parts(r.endMemory)
        } |`,
      );
      measured.push({ mode, services, figures: [r.firstSyncRssMiB, r.endRssMiB, r.peakRssMiB] });
    }
  }
  // The charts, from this run's figures, beside upstream's (dashed).
  for (const [k, what] of ["after the first sync", "after the changes", "peak"].entries()) {
    const series = ["nftables", "iptables"].flatMap((mode) => [
      {
        name: mode,
        points: measured.filter((m) => m.mode === mode).map((m) => [m.services, m.figures[k]] as const),
      },
      {
        name: `upstream ${mode}`,
        reference: true,
        points: sizes.filter((n) => upstream[`${mode} ${n}`] !== undefined)
          .map((n) => [n, upstream[`${mode} ${n}`][k]] as const),
      },
    ]);
    await chart(`memory-${["first-sync", "end", "peak"][k]}.svg`, {
      title: `RSS ${what}`,
      x: "Services (x 10 endpoints)",
      y: "MiB",
      series,
    });
  }
}

if (which.has("scale") && Deno.uid() === 0) {
  const sizes = (Deno.env.get("SCALE_SIZES") ?? "5000x50,50000x1,50000x10").split(",").map((x) =>
    x.split("x").map(Number)
  );
  const changes = Number(Deno.env.get("SCALE_CHANGES") ?? "110");
  const modes = (Deno.env.get("SCALE_MODES") ?? "nftables").split(",") as Array<ScaleResult["mode"]>;
  out(`\n## Scale: the real program (deno task start) against the test API server, N Services x E endpoints`);
  out(machineCostsLine(await machineCosts()));
  out(
    `Cold start: process start to every Service in the kernel; its floor: nft -f of the same transaction ` +
      `(iptables: the rules as iptables-save prints them, restored) into an empty namespace. ${changes} ` +
      `one-endpoint changes 1.1-1.6 s apart, each from the API write to the new endpoint in the kernel ` +
      `(nftables: the kernel's netlink notification of the new element; iptables: its chain, listed every 25 ms; iptables-legacy: the restore declaring it committed), with the periodic sync and the drift check running; ` +
      `change floor: nft -f of one change's transaction on the loaded table, with a netlink listener open as the program's changes had (iptables: the smallest restore that commits), timed around the tool alone, and the CPU it spent. CPU: the program and its kernel tools over the changes, per change (the program + its tools). RSS: after the first sync / at the end / the most ` +
      `sampled every 100 ms / the peak (VmHWM).`,
  );
  out(
    "| mode | services x endpoints | cold start | floor | ratio | change to kernel median / p99 / max | change floor | CPU per change | its floor | RSS MiB | syncs partial / full, drift repairs |",
  );
  out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  const points = new Map<string, Point[]>();
  const starts: string[] = [];
  const cores = navigator.hardwareConcurrency;
  for (const mode of modes) {
    for (const [services, endpoints] of sizes) {
      // iptables at 5,000 Services only: its rules are chains per Service and endpoint, and at 50,000
      // Services one restore takes minutes (the scale at which upstream points to nftables).
      if (mode !== "nftables" && (services > 5000 || services * endpoints > 250_000)) continue;
      const r = await benchScale({ mode, services, endpoints, changes });
      const size = `${services.toLocaleString("en")} x ${endpoints}`;
      for (
        const [name, v] of [["median", r.change.median], ["p99", r.change.p99], [
          "max",
          r.change.max,
        ]] as const
      ) {
        const k = `${mode} ${name}`;
        points.set(k, [...points.get(k) ?? [], [services * endpoints, v]]);
      }
      out(
        `| ${mode} | ${size} | ${r.coldStartS.toFixed(2)} s | ${r.floorS.toFixed(2)} s | ${
          (r.coldStartS / r.floorS).toFixed(2)
        }x | ${r.change.median} / ${r.change.p99} / ${r.change.max} ms${
          r.change.missed > 0 ? ` (${r.change.missed} missed)` : ""
        } | ${`${
          r.floorChangeMs.toFixed(1)
        } ms`} | ${r.cpuPerChangeMs} ms (${r.cpuSplitMs.own} + ${r.cpuSplitMs.tools}) | ${
          r.floorChangeCpuMs.toFixed(1)
        } ms | ${r.rss.afterFirstSync} / ${r.rss.end} / ${r.rss.maxSampled} / ${r.rss.peak} | ${r.syncs.partial} / ${r.syncs.full}, ${r.syncs.driftRepairs} |`,
      );
      starts.push(
        startCpuRow({ mode, size, cpu: r.coldStartCpu, coldStartS: r.coldStartS, floorS: r.floorS }, cores),
      );
      // After each size: a run cut short still leaves the chart of what it measured.
      await chart("scale-change.svg", {
        title: "One endpoint change, API write to the kernel, against the table's size",
        x: "endpoints in the table",
        y: "ms",
        series: [...points].map(([name, pts]) => ({ name, points: [...pts].sort((a, b) => a[0] - b[0]) })),
      });
    }
  }
  out(
    `\nCPU of each start until its first sync was in (sampled every 10 ms): the program's main thread, its other ` +
      `threads (V8's collector and compilers), the kernel tools it waited for, the test API server serving it; ` +
      `their total over the ${cores} cores is as soon as a start doing this work could end, however well it overlapped.`,
  );
  for (const line of [...startCpuHeader(cores), ...starts]) out(line);
}

if (which.has("cold") && Deno.uid() === 0) {
  const here = new URL("..", import.meta.url).pathname;
  const roots = (Deno.env.get("COLD_ROOTS") ?? here).split(",").map((r) => r.endsWith("/") ? r : `${r}/`);
  const rounds = Number(Deno.env.get("COLD_ROUNDS") ?? "12");
  const [services, endpoints] = (Deno.env.get("COLD_SIZE") ?? "50000x1").split("x").map(Number);
  const dualStack = Deno.env.get("COLD_STACK") === "dual";
  out(
    `\n## Cold starts side by side: ${services.toLocaleString("en")} ${
      dualStack ? "dual-stack " : ""
    }Services x ${endpoints}, ${rounds} rounds, ` +
      `each checkout started once a round (the order turned every round) against one test API server`,
  );
  out(machineCostsLine(await machineCosts()));
  out(
    "Process start to every Service in the kernel (the program's own line); the CPU it spent until then, averaged " +
      "(main thread, other threads, kernel tools, the test API server); against the first checkout, the rounds it started " +
      "sooner and the mean of its start less the first's in the same round, with twice that mean's standard error; " +
      "the program's minor page faults until then, averaged (a page first touched costs what the machine's line says).",
  );
  const seconds = (ms: number) => (ms / 1000).toFixed(2);
  const { starts: results, floorMs, leanMs, directMs } = await benchColdStarts({
    roots,
    rounds,
    services,
    endpoints,
    dualStack,
  });
  if (floorMs !== undefined) {
    out(
      `The kernel's floor, the same first sync's transaction as one \`nft -f\` into an empty ruleset in the same ` +
        `namespace, once a round in turn with the starts (the median of the rounds'): ${
          seconds(floorMs)
        } s; the mean's ratio to it beside each checkout.`,
    );
  }
  if (floorMs !== undefined && leanMs !== undefined) {
    out(
      `A lean start in the same namespace (\`bench/lean_start.ts\`: a process that lists the same objects, parses ` +
        `them whole and loads the same transaction as the program loads a new table, with no model; once a round, ` +
        `the median): ${seconds(leanMs)} s, ${(leanMs / floorMs).toFixed(2)}x the floor.`,
    );
  }
  if (floorMs !== undefined && directMs !== undefined) {
    const at = (ms: number) => `${seconds(ms)} s (${(ms / floorMs).toFixed(2)}x)`;
    out(
      `Direct starts in the same namespace (\`bench/direct_start.ts\`: the same lists parsed whole and the nftables ` +
        `proxier's own first sync, IPv4 only, no informer; once a round each, the median): the lists read straight ` +
        `into the proxier's maps ${at(directMs.direct)}; through its handlers and change trackers ${
          at(directMs.handled)
        }.`,
    );
  }
  out(
    "| checkout | mean | median | fastest - slowest | ratio to the floor | against the first: sooner, mean difference | CPU: main / other threads / tools / API server | minor page faults: main / other threads |",
  );
  out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  /** Against the first checkout, round by round (the first row has none). */
  const against = (starts: readonly number[]) => {
    const p = againstFirst(results[0].startsMs, starts);
    return `${p.sooner} of ${p.of}, ${p.meanMs < 0 ? "" : "+"}${seconds(p.meanMs)} ± ${seconds(p.twoSeMs)} s`;
  };
  for (const r of results) {
    const done = r.startsMs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
    const mean = done.reduce((a, b) => a + b, 0) / done.length;
    const avg = (k: keyof StartCpu) => (r.cpu.reduce((a, c) => a + c[k], 0) / r.cpu.length).toFixed(2);
    out(
      `| ${r.root} | ${seconds(mean)} s | ${seconds(done[Math.floor(done.length / 2)])} s | ${
        seconds(done[0])
      } - ${seconds(done.at(-1)!)} s | ${floorMs === undefined ? "-" : `${(mean / floorMs).toFixed(2)}x`} | ${
        r === results[0] ? "-" : against(r.startsMs)
      } | ${avg("main")} / ${avg("threads")} / ${avg("tools")} / ${avg("driver")} s | ${
        meanFaults(r.faults, "main")
      } / ${meanFaults(r.faults, "threads")} |`,
    );
  }
}

if (which.has("chaos")) {
  const seconds = Number(Deno.env.get("CHAOS_SECONDS") ?? "600");
  const seed = Number(Deno.env.get("CHAOS_SEED") ?? "7");
  out(
    `\n## fault schedule, seed ${seed}, ${seconds} s per mode: the real program in a network namespace, ` +
      `12 Services under churn, API server faults (60 s stalls included), failing, no-op and hung tools, SIGKILLs, drift`,
  );
  out(
    "| mode | faults injected | changes | recoveries | longest outage | converged after | updates lost | unjustified 503s | unexplained failures | unexpected exits |",
  );
  out("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  // Each run CHAOS_MODES can name: its mode, iptables backend and row name. iptables-legacy: iptables
  // mode on the legacy backend, the one the xtables lock blocks.
  const RUNS = {
    iptables: { mode: "iptables", backend: undefined, name: "iptables (nf_tables)" },
    "iptables-legacy": { mode: "iptables", backend: "legacy", name: "iptables (legacy)" },
    nftables: { mode: "nftables", backend: undefined, name: "nftables" },
    ipvs: { mode: "ipvs", backend: undefined, name: "ipvs (VM, emulated CPU)" },
  } as const;
  const runs = (Deno.env.get("CHAOS_MODES") ?? Object.keys(RUNS).join(",")).split(",") as Array<
    keyof typeof RUNS
  >;
  const unknown = runs.filter((run) => !(run in RUNS));
  if (unknown.length > 0) {
    throw new Error(`CHAOS_MODES: no run ${unknown.join(", ")} (${Object.keys(RUNS).join(", ")})`);
  }
  const causes: string[] = [];
  for (const run of runs) {
    const { mode, backend, name } = RUNS[run];
    const r = await benchChaos(mode, seed, seconds, 60_000, backend);
    const faults = Object.entries(r.faults).sort().map(([k, n]) => `${k} ${n}`).join(", ") +
      (r.notRun.length > 0 ? ` (never reached: ${r.notRun.join(", ")})` : "");
    out(
      `| ${name} | ${faults} | ${r.changes} | ${r.recoveries} | ${
        (r.longestOutageMs / 1000).toFixed(1)
      } s | ` +
        `${
          (r.convergedMs / 1000).toFixed(1)
        } s | ${r.lost} | ${r.unjustified503} | ${r.unexplainedFailures} | ${r.unexpectedExits} |`,
    );
    causes.push(`${name}: ${r.longestOutageFaults.join(", ") || "none"}`);
  }
  out("\nFaults from 2 s before the longest outage until its end (seconds from its start):");
  for (const c of causes) out(`- ${c}`);
}

if (which.has("nftables")) {
  const root = Deno.uid() === 0;
  out(
    `\n## nftables mode, N services x 10 endpoints (same generator); build: our work on a dry run; kernel: ` +
      `the real proxier on the real nft in a fresh network namespace; change: one endpoint, from the event until ` +
      `the kernel holds it (median / max of 10)`,
  );
  out(
    "| services | build full transaction | lines | MiB | partial build, 1 endpoint | nft -f of the full transaction | full sync (build + kernel) | change to kernel median / max | drift check (periodic syncs) | peak RSS MiB (build / kernel) |",
  );
  out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  const points = {
    full: [] as Point[],
    floor: [] as Point[],
    change: [] as Point[],
    upstream: [] as Point[],
  };
  for (const n of [1000, 5000, 10_000, 50_000]) {
    const b = await child("./nftables.ts", ["build", String(n), "120"]);
    const k = root ? await child("./nftables.ts", ["kernel", String(n)]) : {};
    if (typeof k.fullSyncS === "number") points.full.push([n, k.fullSyncS]);
    if (typeof b.kernelLoadS === "number") points.floor.push([n, b.kernelLoadS]);
    if (typeof k.changeMedianMs === "number") points.change.push([n, k.changeMedianMs]);
    const kernelLoad = typeof b.kernelLoadS === "number" ? `${b.kernelLoadS} s` : b.kernelLoadS ?? "not root";
    out(
      `| ${n} | ${b.buildMs} ms | ${b.lines} | ${
        (Number(b.bytes) / 2 ** 20).toFixed(1)
      } | ${b.partialMs} ms | ${kernelLoad} | ${k.fullSyncS ?? "-"} s | ${k.changeMedianMs ?? "-"} / ${
        k.changeMaxMs ?? "-"
      } ms | ${k.driftCheckMs ?? "-"} ms | ${b.peakRssMiB} / ${k.peakRssMiB ?? "-"} |`,
    );
  }
  if (root) {
    out(
      "\nUpstream's nftables layout (a chain per service and per endpoint) for the same objects, `nft -f` into a fresh namespace:",
    );
    out("| services | upstream layout load |");
    out("| ---: | ---: |");
    for (const n of [1000, 5000]) {
      const u = await child("./nftables.ts", ["upstream", String(n), "300"]);
      out(`| ${n} | ${typeof u.upstreamLoadS === "number" ? `${u.upstreamLoadS} s` : u.upstreamLoadS} |`);
      if (typeof u.upstreamLoadS === "number") points.upstream.push([n, u.upstreamLoadS]);
    }
  }
  await chart("nftables-full-sync.svg", {
    title: "nftables: full sync, from its start to the rules in the kernel",
    x: "Services (x 10 endpoints)",
    y: "seconds",
    series: [
      { name: "ours (build + nft -f)", points: points.full },
      { name: "kernel floor: nft -f of it", points: points.floor, reference: true },
      { name: "upstream's layout, nft -f", points: points.upstream, reference: true },
    ],
  });
  await chart("nftables-change.svg", {
    title: "nftables: one endpoint change, event to kernel (median)",
    x: "Services (x 10 endpoints)",
    y: "ms",
    series: [{ name: "ours", points: points.change }],
  });
}

if (which.has("npl") || which.has("memory")) {
  // The start task's V8 flags, so the floor is the program's.
  const task = JSON.parse(Deno.readTextFileSync(new URL("../deno.json", import.meta.url))).tasks
    .start as string;
  const v8 = /--v8-flags=(\S+)/.exec(task)?.[1] ?? "";
  const floor: Record<string, number> = {};
  for (const what of ["none", "program", "proxy", "everything"]) {
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `--v8-flags=${v8}`, new URL("./memory_floor.ts", import.meta.url).pathname, what],
      stderr: "inherit",
    }).output();
    floor[what] = JSON.parse(new TextDecoder().decode(r.stdout)).rssMiB;
  }
  out(
    `\nMemory floor (RSS before any object, V8 flags ${v8}): Deno alone ${floor.none} MiB; the entry point ` +
      `(command line, registry) ${floor.program} MiB; what the running proxy loads (its code, the Kubernetes ` +
      `source, the nftables and iptables proxiers) ${floor.proxy} MiB; every command and the read side as well ` +
      `(what a start loaded when all were imported at start) ${floor.everything} MiB.`,
  );
}

if (which.has("npl") && Deno.uid() === 0) {
  const spreadS = Number(Deno.env.get("NPL_SPREAD") ?? "180");
  const changes = Math.max(10, Math.round(spreadS / 3));
  out(
    `\n## iptables mode, the real program (deno task start) in a network namespace, N services x 10 endpoints`,
  );
  out(
    `Source: the test API server (real client-node informers) or a directory of one file per object. ` +
      `First sync: program start until the first full sync's restore returned; floor: the same rules as ` +
      `iptables-save prints them, restored with --noflush into an empty namespace, same run. ` +
      `${changes} single-endpoint changes over ${spreadS} s; latency: from the change until the new ` +
      `endpoint's chain is in the kernel; partial floor: the kernel's time for one such partial restore.`,
  );
  out(
    "| services | backend | source | first sync | floor | ratio | change to kernel median / p90 / max | partial floor | full / partial syncs | RSS after first sync / end / peak MiB | SIGTERM to exit |",
  );
  out("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  const runs: Array<Omit<NplOptions, "changes" | "spreadS">> = [
    { services: 1000, backend: "nft", source: "api" },
    { services: 1000, backend: "legacy", source: "api" },
    { services: 2000, backend: "nft", source: "api" },
    { services: 2000, backend: "nft", source: "file" },
    { services: 5000, backend: "legacy", source: "api" },
    { services: 5000, backend: "nft", source: "api" },
  ];
  type Lines = { first: Point[]; floor: Point[]; change: Point[]; partialFloor: Point[] };
  const lines = new Map<string, Lines>();
  for (const run of runs) {
    const r = await benchNpl({ ...run, changes, spreadS });
    if (run.source === "api") {
      const l = lines.get(run.backend) ?? { first: [], floor: [], change: [], partialFloor: [] };
      lines.set(run.backend, l);
      l.first.push([r.services, r.firstSyncS]);
      if (typeof r.floorS === "number") l.floor.push([r.services, r.floorS]);
      l.change.push([r.services, r.npl.median]);
      if (typeof r.partialFloorS === "number") l.partialFloor.push([r.services, r.partialFloorS]);
    }
    const s = (x: number | string) => typeof x === "number" ? `${x} s` : x;
    const ratio = typeof r.floorS === "number" ? `${(r.firstSyncS / r.floorS).toFixed(2)}x` : "-";
    out(
      `| ${r.services} | ${r.backend} | ${r.source} | ${r.firstSyncS} s | ${
        s(r.floorS)
      } | ${ratio} | ${r.npl.median} / ${r.npl.p90} / ${r.npl.max} s${
        r.npl.missed > 0 ? ` (${r.npl.missed} missed)` : ""
      } | ${
        s(r.partialFloorS)
      } | ${r.fullSyncs} / ${r.partialSyncs} | ${r.rssAfterFirstSyncMiB} / ${r.rssEndMiB} / ${r.peakRssMiB} | ${r.stopS} s |`,
    );
  }
  /** Per backend, our line and the kernel floor's (dashed). */
  const oursAndFloor = (ours: (l: Lines) => Point[], floor: (l: Lines) => Point[]) =>
    [...lines].flatMap(([backend, l]) => [
      { name: `${backend}: ours`, points: ours(l) },
      { name: `${backend}: kernel floor`, points: floor(l), reference: true },
    ]);
  await chart("iptables-first-sync.svg", {
    title: "iptables: first full sync, program start to rules in the kernel (API source)",
    x: "Services (x 10 endpoints)",
    y: "seconds",
    series: oursAndFloor((l) => l.first, (l) => l.floor),
  });
  await chart("iptables-change.svg", {
    title: "iptables: one endpoint change, edit to kernel (median)",
    x: "Services (x 10 endpoints)",
    y: "seconds",
    series: oursAndFloor((l) => l.change, (l) => l.partialFloor),
  });
}
