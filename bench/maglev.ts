/**
 * What Maglev (`kube-router.io/service.scheduler: mh`, nftables mode) buys, measured; one JSON line
 * per run:
 *   deno run -A bench/maglev.ts flows N M     10,000 random flows to a Service of N endpoints with
 *                                              a table of M slots: the share two nodes (the same
 *                                              objects, endpoints in another order) send to the same
 *                                              endpoint, and the share whose endpoint changes when one
 *                                              endpoint is removed, for mh, sh and the default random
 *                                              choice. Each flow is walked through each node's rules
 *                                              by the nftables tracer, which computes jhash as the
 *                                              kernel does (tests/e2e/jhash_test.ts holds it to nft).
 *   deno run -A bench/maglev.ts build M        table build time and kernel elements per table for
 *                                              N = 3, 10, 100
 *   deno run -A bench/maglev.ts kernel N M     full sync of N Services x 10 endpoints, 1% of them
 *                                              Maglev (M slots; M = 0: none), the real proxier on the
 *                                              real nft in a fresh network namespace
 * @module
 */
import { FakeNft } from "../iptables/testing/fake_nft.ts";
import { type Executor, inputText } from "../iptables/executor.ts";
import { NftRunner } from "../iptables/nft.ts";
import { maglevLookup } from "../loadbalancer/maglev.ts";
import type { NFTables } from "../iptables/nft.ts";
import { TABLE } from "../proxier/nftables/layout.ts";
import { NftablesProxier } from "../proxier/nftables/proxier.ts";
import { traceNft } from "../proxier/trace/nft_walker.ts";
import { DryRunExecutor } from "../iptables/dry_run.ts";
import { withNamespace } from "../tests/support/namespace.ts";
import { benchNftablesProxier } from "./nftables_proxier.ts";
import { generate, peakRssMiB, slice } from "./objects.ts";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";

const FLOWS = 10_000;
const CLUSTER_IP = "172.29.0.1";

/** A proxier of node `node` over `nft` with Maglev's table size `m`. */
function proxier(node: string, nft: NFTables, exec: Executor, m: number): NftablesProxier {
  return benchNftablesProxier(exec, { node, nft, maglevTableSize: m });
}

/** A Service `name` at `ip` balanced by `scheduler` (undefined: the default). */
function service(name: string, ip: string, scheduler: string | undefined): V1Service {
  return {
    metadata: {
      namespace: "bench",
      name,
      ...(scheduler === undefined ? {} : { annotations: { "kube-router.io/service.scheduler": scheduler } }),
    },
    spec: {
      type: "ClusterIP",
      clusterIP: ip,
      clusterIPs: [ip],
      ports: [{ name: "http", port: 80, protocol: "TCP" }],
    },
  };
}

/** Service `name`'s slice with `addresses`, in that order. */
function endpoints(name: string, addresses: string[]): V1EndpointSlice {
  return {
    metadata: { namespace: "bench", name: `${name}-abc`, labels: { "kubernetes.io/service-name": name } },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
  };
}

/** A deterministic pseudo-random sequence (xorshift32), so every run draws the same flows. */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13, x >>>= 0, x ^= x >>> 17, x ^= x << 5, x >>>= 0;
    return x / 2 ** 32;
  };
}

/** One node: its rules for a Service of `scheduler`, and where each flow goes through them. */
async function node(name: string, scheduler: string | undefined, addresses: string[], m: number) {
  const fake = new FakeNft();
  const p = proxier(name, fake.forFamily("IPv4"), new DryRunExecutor(), m);
  p.onServiceAdd(service("web", CLUSTER_IP, scheduler));
  p.onEndpointSliceAdd(endpoints("web", addresses));
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  await p.syncNow();
  const reach = (flows: Array<{ src: string; sport: number }>) =>
    flows.map(({ src, sport }) => {
      const r = traceNft(fake, "IPv4", TABLE, { src, sport, dst: CLUSTER_IP, port: 80, protocol: "tcp" }, [
        "192.168.0.2",
      ]);
      if (r.endpoints.length !== 1) throw new Error(`${src}:${sport} reaches ${r.endpoints.join(", ")}`);
      return r.endpoints[0];
    });
  /** Removes one endpoint (a partial sync, as in the cluster). */
  const remove = async (address: string) => {
    p.onEndpointSliceUpdate(
      endpoints("web", addresses),
      endpoints("web", addresses.filter((a) => a !== address)),
    );
    await p.syncNow();
  };
  return { reach, remove };
}

/** The share of `a` and `b` that differ, in percent. */
const changed = (a: string[], b: string[]) => 100 * a.filter((x, i) => x !== b[i]).length / a.length;
const round = (x: number, d = 2) => Number(x.toFixed(d));

if (import.meta.main) {
  const [what, nText, mText] = Deno.args;
  if (what === "flows") {
    const n = Number(nText);
    const m = Number(mText);
    const next = random(n * 7919 + m);
    const flows = Array.from({ length: FLOWS }, () => ({
      src: `10.${1 + Math.floor(next() * 200)}.${Math.floor(next() * 256)}.${1 + Math.floor(next() * 254)}`,
      sport: 1024 + Math.floor(next() * 64511),
    }));
    const addresses = Array.from({ length: n }, (_, i) => `10.240.${i >> 8}.${(i & 255) + 1}`);
    const removed = addresses[Math.floor(n / 2)];
    const result: Record<string, number> = { endpoints: n, tableSize: m, flows: FLOWS };
    for (const scheduler of ["mh", "sh"]) {
      const a = await node("node-a", scheduler, addresses, m);
      const b = await node("node-b", scheduler, [...addresses].reverse(), m);
      const onA = a.reach(flows);
      result[`${scheduler}AgreePct`] = round(100 - changed(onA, b.reach(flows)));
      await a.remove(removed);
      result[`${scheduler}MovedPct`] = round(changed(onA, a.reach(flows)));
    }
    // The default: each new connection draws anew, before and after.
    const before = flows.map(() => addresses[Math.floor(next() * n)]);
    const rest = addresses.filter((x) => x !== removed);
    result.randomAgreePct = round(100 - changed(before, flows.map(() => addresses[Math.floor(next() * n)])));
    result.randomMovedPct = round(changed(before, flows.map(() => rest[Math.floor(next() * (n - 1))])));
    result.boundPct = round(100 / n + 2);
    console.log(JSON.stringify(result));
  } else if (what === "build") {
    const m = Number(nText);
    for (const n of [3, 10, 100]) {
      const names = Array.from({ length: n }, (_, i) => `10.240.${i >> 8}.${(i & 255) + 1}:8080`);
      maglevLookup(names, m, 1); // warm up
      const t = performance.now();
      const rounds = 20;
      for (let r = 0; r < rounds; r++) maglevLookup(names, m, r);
      console.log(
        JSON.stringify({ tableSize: m, endpoints: n, buildMs: round((performance.now() - t) / rounds, 3) }),
      );
    }
  } else if (what === "kernel") {
    const n = Number(nText);
    const m = Number(mText);
    const transactions: string[] = [];
    let firstSyncDone = false;
    const result = await withNamespace(async (inner) => {
      // Keeps the first sync's transactions, for nft's own memory below.
      const exec: Executor = {
        run: (cmd, o) => {
          if (cmd === "nft" && !firstSyncDone && o.stdin !== undefined) transactions.push(inputText(o.stdin));
          return inner.run(cmd, o);
        },
      };
      const p = proxier("node-a", new NftRunner({ exec, family: "IPv4" }), exec, m === 0 ? 16381 : m);
      const { services, slices } = generate(n);
      // Every 100th Service is a Maglev one (1%).
      services.forEach((s, i) => {
        if (m > 0 && i % 100 === 0) s.metadata!.annotations = { "kube-router.io/service.scheduler": "mh" };
        p.onServiceAdd(s);
      });
      for (const s of slices) p.onEndpointSliceAdd(s);
      p.onServicesSynced();
      p.onEndpointSlicesSynced();
      const t = performance.now();
      await p.syncNow();
      const fullSyncS = (performance.now() - t) / 1000;
      firstSyncDone = true;
      const chains = await new NftRunner({ exec, family: "IPv4" }).listChains(TABLE);
      const tables = (chains ?? []).filter((c) => c.name.startsWith("mh-")).length;
      // One endpoint of a Maglev Service (the first) replaced: the slots that move, to the kernel.
      const c = performance.now();
      p.onEndpointSliceUpdate(slices[0], slice("svc-0", 0, 1));
      await p.syncNow();
      return {
        services: n,
        tableSize: m,
        maglevTables: tables,
        maglevElements: tables * m,
        fullSyncS: round(fullSyncS),
        changeMs: round(performance.now() - c, 1),
        peakRssMiB: Math.round(peakRssMiB()),
      };
    });
    // The kernel's floor (those transactions loaded by nft -f alone) and nft's own peak memory over
    // them (GNU time, when installed), in a fresh namespace.
    const replay = await withNamespace(async (exec) => {
      let peak: number | null = 0;
      let seconds = 0;
      for (const stdin of transactions) {
        const t = performance.now();
        const r = await exec.run("/usr/bin/time", { args: ["-f", "%M", "nft", "-f", "-"], stdin })
          .catch(() => exec.run("nft", { args: ["-f", "-"], stdin }));
        seconds += (performance.now() - t) / 1000;
        if (r.code !== 0) throw new Error(`nft -f of a recorded transaction failed: ${r.stderr}`);
        const kb = Number(r.stderr.trim().split("\n").at(-1));
        peak = peak !== null && kb > 0 ? Math.max(peak, Math.round(kb / 1024)) : null;
      }
      return { nftFloorS: round(seconds), nftPeakMiB: peak };
    });
    console.log(JSON.stringify({ ...result, transactions: transactions.length, ...replay }));
  } else {
    console.error("usage: bench/maglev.ts flows N M | build M | kernel N M");
    Deno.exit(2);
  }
}
