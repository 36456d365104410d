/**
 * Userspace datapath on loopback: single-stream throughput and short-connection rate through the
 * proxy, next to a direct connection to the same backend, in one run.
 * @module
 */
import { benchConfig } from "./objects.ts";
import { DryRunExecutor } from "../iptables/dry_run.ts";
import { newModeDeps, proxierOptions } from "../proxier/mode_definition.ts";
import { userspaceMode } from "../proxier/userspace/mode.ts";
import { realClock } from "../proxier/runtime/clock.ts";
import { nullLogger } from "../proxier/runtime/logger.ts";
import { UserspaceProxier } from "../proxier/userspace/proxier.ts";
import { LOAD_SCRIPT, loadServer } from "./load_server.ts";

/** Figures of one run. */
export interface UserspaceBenchResult {
  readonly bytes: number;
  readonly directMBps: number;
  readonly proxyMBps: number;
  /** Slowest and fastest of the runs, MB/s. */
  readonly directRange: readonly [number, number];
  readonly proxyRange: readonly [number, number];
  readonly connections: number;
  readonly directConnPerSec: number;
  readonly proxyConnPerSec: number;
}

/** Runs a load-tool client process; returns the number it prints. */
async function client(mode: "stream" | "conns", port: number, n: number): Promise<number> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", LOAD_SCRIPT, mode, String(port), String(n)],
  }).output();
  if (out.code !== 0) throw new Error(`load ${mode} failed: ${new TextDecoder().decode(out.stderr)}`);
  return Number(new TextDecoder().decode(out.stdout).trim());
}

/** Runs the userspace benchmark; `bytes` per stream, `connections` sequential connects. */
export async function benchUserspace(bytes = 1 << 30, connections = 2000): Promise<UserspaceBenchResult> {
  const sink = await loadServer("sink");
  const hello = await loadServer("hello");
  const config = benchConfig({ minSyncPeriodMs: 0 });
  const deps = newModeDeps(config, {
    nodeName: "bench",
    log: nullLogger,
    clock: realClock,
    exec: new DryRunExecutor(),
  });
  const p = new UserspaceProxier({
    ...proxierOptions(deps, "IPv4", userspaceMode.schedulers(deps.config)),
    listenAddress: "127.0.0.1",
    nodePortAddresses: ["127.0.0.1/32"],
    nodeIPs: ["127.0.0.1"],
    portRange: { min: 0, max: 0 },
    udpIdleTimeoutMs: 250,
  });
  const ports: Record<string, number> = {};
  for (const [name, backend] of [["sink", sink.port], ["hello", hello.port]] as const) {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    ports[name] = (l.addr as Deno.NetAddr).port;
    l.close();
    p.onServiceAdd({
      metadata: { namespace: "bench", name },
      spec: {
        type: "NodePort",
        clusterIP: "172.30.0.1",
        ports: [{ name: "p", port: 80, protocol: "TCP", nodePort: ports[name] }],
      },
    });
    p.onEndpointSliceAdd({
      metadata: { namespace: "bench", name, labels: { "kubernetes.io/service-name": name } },
      addressType: "IPv4",
      ports: [{ name: "p", port: backend, protocol: "TCP" }],
      endpoints: [{ addresses: ["127.0.0.1"] }],
    });
  }
  const ac = new AbortController();
  const loop = p.syncLoop(ac.signal);
  p.onServicesSynced();
  p.onEndpointSlicesSynced();
  for (let i = 0; i < 100; i++) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port: ports.hello })).close();
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  // Warm-up, then alternate direct and proxied runs so machine noise hits both alike.
  await client("stream", sink.port, bytes / 8);
  await client("stream", ports.sink, bytes / 8);
  const direct: number[] = [];
  const proxied: number[] = [];
  for (let i = 0; i < 5; i++) {
    direct.push(await client("stream", sink.port, bytes));
    proxied.push(await client("stream", ports.sink, bytes));
  }
  await client("conns", hello.port, 200);
  await client("conns", ports.hello, 200);
  const directConnPerSec = await client("conns", hello.port, connections);
  const proxyConnPerSec = await client("conns", ports.hello, connections);
  ac.abort();
  await loop;
  p.close();
  await sink.close();
  await hello.close();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return {
    bytes,
    directMBps: median(direct),
    proxyMBps: median(proxied),
    directRange: [Math.min(...direct), Math.max(...direct)],
    proxyRange: [Math.min(...proxied), Math.max(...proxied)],
    connections,
    directConnPerSec,
    proxyConnPerSec,
  };
}
