/**
 * ipvs mode at scale. `deno run -A bench/ipvs.ts build SERVICES [DIR]`: the real proxier on a dry
 * run (an empty kernel) syncs SERVICES services x 10 endpoints (the one generator), then five
 * one-endpoint partial syncs; prints one JSON line (our own work only) and, with DIR, writes the
 * full sync's batches there. `deno run -A bench/ipvs.ts kernel DIR` (inside the VM, tests/vm/run.sh)
 * applies those batches to a real kernel with the real tools and prints their times.
 * @module
 */
import { DryRunExecutor } from "../iptables/dry_run.ts";
import { IpLinkRunner } from "../iptables/ip_link.ts";
import { IpsetRunner } from "../iptables/ipset.ts";
import { IptablesRunner } from "../iptables/iptables.ts";
import { IpvsadmRunner } from "../iptables/ipvsadm.ts";
import { IpvsProxier } from "../proxier/ipvs/proxier.ts";
import { newModeDeps, proxierOptions } from "../proxier/mode_definition.ts";
import { ipvsMode } from "../proxier/ipvs/mode.ts";
import { realClock } from "../proxier/runtime/clock.ts";
import { nullLogger } from "../proxier/runtime/logger.ts";
import { benchConfig, feedGenerated, peakRssMiB, slice } from "./objects.ts";

async function build(n: number, dir?: string): Promise<void> {
  const dry = new DryRunExecutor();
  const config = benchConfig({ mode: "ipvs", clusterCIDRs: ["10.0.0.0/8"] });
  const deps = newModeDeps(config, { nodeName: "node-a", log: nullLogger, clock: realClock, exec: dry });
  const p = new IpvsProxier({
    ...proxierOptions(deps, "IPv4", ipvsMode.schedulers(deps.config)),
    syncPeriodMs: 3_600_000,
    ipvs: new IpvsadmRunner({ exec: dry }),
    ipset: new IpsetRunner({ exec: dry }),
    iptables: new IptablesRunner({ exec: dry, family: "IPv4" }),
    link: new IpLinkRunner({ exec: dry }),
    scheduler: "rr",
    excludeCIDRs: [],
    masqueradeAll: false,
    masqueradeBit: 14,
    nodePortAddresses: [],
    nodeIPs: [],
  });
  const eventsMs = feedGenerated(p, n);
  let t = performance.now();
  await p.syncNow();
  const buildMs = performance.now() - t;
  const batches = {
    ipset: dry.lastInput("ipset") ?? "",
    iptables: dry.lastInput("iptables-restore") ?? "",
    ip: dry.lastInput("ip") ?? "",
    ipvsadm: dry.lastInput("ipvsadm") ?? "",
  };
  if (dir !== undefined) {
    for (const [name, text] of Object.entries(batches)) await Deno.writeTextFile(`${dir}/${name}`, text);
  }
  const lines = (s: string) => s.split("\n").filter((l) => l !== "").length;
  const partials: number[] = [];
  let partialLines = 0;
  for (let g = 1; g <= 5; g++) {
    const i = Math.floor(n / 2) + g;
    const before = dry.commands.length;
    p.onEndpointSliceUpdate(slice(`svc-${i}`, i, 0), slice(`svc-${i}`, i, g));
    t = performance.now();
    await p.syncNow();
    partials.push(performance.now() - t);
    partialLines = dry.commands.slice(before).reduce((k, c) => k + lines(c.stdin ?? ""), 0);
  }
  partials.sort((a, b) => a - b);
  console.log(JSON.stringify({
    services: n,
    eventsMs: Math.round(eventsMs),
    buildMs: Math.round(buildMs),
    ipvsadmLines: lines(batches.ipvsadm),
    ipsetLines: lines(batches.ipset),
    ipLines: lines(batches.ip),
    iptablesLines: lines(batches.iptables),
    partialMs: Number(partials[2].toFixed(1)),
    partialLines,
    peakRssMiB: Math.round(peakRssMiB()),
  }));
}

/** Applies the batches in `dir` in a fresh network namespace of this (IPVS) kernel; times each. */
async function kernel(dir: string): Promise<void> {
  const ns = `kpdbench-${crypto.randomUUID().slice(0, 8)}`;
  const run = async (args: string[], stdinFile?: string) => {
    const child = new Deno.Command("ip", {
      args: ["netns", "exec", ns, ...args],
      stdin: stdinFile === undefined ? "null" : "piped",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const t = performance.now();
    if (stdinFile !== undefined) {
      const w = child.stdin.getWriter();
      await w.write(await Deno.readFile(stdinFile));
      await w.close();
    }
    const out = await child.output();
    if (out.code !== 0) throw new Error(`${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
    return (performance.now() - t) / 1000;
  };
  await new Deno.Command("ip", { args: ["netns", "add", ns] }).output();
  try {
    await run(["ip", "link", "add", "kube-ipvs0", "type", "dummy"]);
    const ipset = await run(["ipset", "restore", "-exist"], `${dir}/ipset`);
    const iptables = await run(["iptables-restore", "--noflush"], `${dir}/iptables`);
    const ip = await run(["ip", "-force", "-batch", "-"], `${dir}/ip`);
    const ipvsadm = await run(["ipvsadm", "-R"], `${dir}/ipvsadm`);
    const round = (x: number) => Number(x.toFixed(2));
    console.log(JSON.stringify({
      ipsetS: round(ipset),
      iptablesS: round(iptables),
      ipS: round(ip),
      ipvsadmS: round(ipvsadm),
      totalS: round(ipset + iptables + ip + ipvsadm),
    }));
  } finally {
    await new Deno.Command("ip", { args: ["netns", "del", ns] }).output();
  }
}

if (import.meta.main) {
  const [what, arg, dir] = Deno.args;
  if (what === "build") await build(Number(arg ?? "1000"), dir);
  else if (what === "kernel") await kernel(arg);
  else throw new Error("usage: bench/ipvs.ts build SERVICES [DIR] | kernel DIR");
}
