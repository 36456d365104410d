/**
 * The userspace mode under load: the real program (started as `deno task start` starts it, file
 * source, `--userspace-portals=false`) in front of an HTTP backend and a UDP echo server, each load
 * run next to the same load sent directly to the backend, in one run. HTTP load is `wrk`; UDP load
 * and the servers are `load.ts` processes. Prints one JSON object ({@linkcode UserspaceLoadResult}).
 * Usage: deno run -A bench/userspace_load.ts [SECONDS_PER_RUN [PROGRAM_FLAG...]]
 * @module
 */
import { LOAD_SCRIPT, loadServer } from "./load_server.ts";
import { freePort } from "../tests/support/net_helpers.ts";
import { hostStartArgs } from "../tests/support/program.ts";

/** How long after a load run its "after" figures are taken. */
export const SETTLE_MS = 15_000;

/** One wrk run. */
export interface WrkFigures {
  readonly connections: number;
  readonly requestsPerSec: number;
  readonly requests: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Socket errors (connect, read, write, timeout) and non-2xx answers. */
  readonly errors: { connect: number; read: number; write: number; timeout: number; status: number };
}

/** The proxy process's open fds and RSS at one moment. */
export interface ProcFigures {
  readonly fds: number;
  readonly rssMiB: number;
}

/** A proxied run with the proxy's state before, at the end of the load and after it settled. */
export interface LoadRun {
  readonly direct: WrkFigures;
  readonly proxy: WrkFigures;
  readonly before: ProcFigures;
  readonly peak: ProcFigures;
  /** {@linkcode SETTLE_MS} after the load. */
  readonly after: ProcFigures;
  /** Seconds after the load until the proxy's fds were back at `before` (-1: never, within 20 s). */
  readonly fdsBackS: number;
}

/** UDP at one rate. */
export interface UdpRun {
  readonly rate: number;
  readonly direct: { sent: number; received: number };
  readonly proxy: { sent: number; received: number };
}

/** Everything the load benchmark measured. */
export interface UserspaceLoadResult {
  readonly seconds: number;
  readonly keepAlive: LoadRun;
  readonly newConnections: LoadRun;
  readonly c1000: LoadRun;
  readonly c5000: LoadRun;
  readonly udp: readonly UdpRun[];
  readonly idle: ProcFigures;
}

function procFigures(pid: number): ProcFigures {
  let fds = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) fds++;
  const rss = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`))?.[1] ?? "0";
  return { fds, rssMiB: Math.round(Number(rss) / 1024) };
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

/** Parses wrk's `--latency` report. */
export function parseWrk(text: string, connections: number): WrkFigures {
  const lat = (pct: string) => {
    const m = new RegExp(`^\\s*${pct}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, "m").exec(text);
    return m === null ? NaN : Number(m[1]) * UNIT_MS[m[2]];
  };
  const se = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const status = /Non-2xx or 3xx responses: (\d+)/.exec(text);
  return {
    connections,
    requestsPerSec: Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1] ?? NaN),
    requests: Number(/(\d+) requests in/.exec(text)?.[1] ?? NaN),
    p50Ms: lat("50"),
    p99Ms: lat("99"),
    errors: {
      connect: Number(se?.[1] ?? 0),
      read: Number(se?.[2] ?? 0),
      write: Number(se?.[3] ?? 0),
      timeout: Number(se?.[4] ?? 0),
      status: Number(status?.[1] ?? 0),
    },
  };
}

async function wrk(port: number, connections: number, seconds: number, close: boolean): Promise<WrkFigures> {
  const args = [
    "-t2",
    `-c${connections}`,
    `-d${seconds}s`,
    "--timeout",
    "5s",
    "--latency",
    ...(close ? ["-H", "Connection: close"] : []),
    `http://127.0.0.1:${port}/`,
  ];
  const r = await new Deno.Command("wrk", { args, stderr: "inherit" }).output();
  return parseWrk(new TextDecoder().decode(r.stdout), connections);
}

async function udp(port: number, rate: number, seconds: number): Promise<{ sent: number; received: number }> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", LOAD_SCRIPT, "udp", String(port), String(rate), "100", String(seconds)],
    stderr: "inherit",
  }).output();
  return JSON.parse(new TextDecoder().decode(r.stdout));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function untilServing(port: number): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch {
      await sleep(50);
    }
  }
  throw new Error(`the proxy never served 127.0.0.1:${port}`);
}

function objects(
  tcp: { nodePort: number; backend: number },
  u: { nodePort: number; backend: number },
): string {
  const svc = (name: string, protocol: string, nodePort: number, ip: string) => `
apiVersion: v1
kind: Service
metadata: { namespace: bench, name: ${name} }
spec:
  type: NodePort
  clusterIP: ${ip}
  clusterIPs: [${ip}]
  ports: [{ name: p, protocol: ${protocol}, port: 80, targetPort: 80, nodePort: ${nodePort} }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: bench, name: ${name}-1, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: p, protocol: ${protocol}, port: ${protocol === "TCP" ? tcp.backend : u.backend} }]
endpoints: [{ addresses: [127.0.0.1], conditions: { ready: true } }]
`;
  return [svc("web", "TCP", tcp.nodePort, "172.30.0.10"), svc("echo", "UDP", u.nodePort, "172.30.0.11")]
    .join("---\n");
}

/** Runs the load benchmark; `seconds` per wrk run, `flags` added to the program's. */
export async function benchUserspaceLoad(
  seconds = 10,
  flags: readonly string[] = [],
): Promise<UserspaceLoadResult> {
  const http = await loadServer("http");
  const echo = await loadServer("udpecho");
  const dir = await Deno.makeTempDir({ prefix: "kpd-bench-us-" });
  const web = freePort();
  const echoPort = freePort();
  await Deno.writeTextFile(
    `${dir}/objects.yaml`,
    objects({ nodePort: web, backend: http.port }, { nodePort: echoPort, backend: echo.port }),
  );
  const proxy = new Deno.Command(Deno.execPath(), {
    args: hostStartArgs([
      "--proxy-mode=userspace",
      `--source=file:${dir}`,
      "--hostname-override=bench",
      "--userspace-portals=false",
      "--nodeport-addresses=127.0.0.1/32",
      `--healthz-bind-address=127.0.0.1:${freePort()}`,
      `--metrics-bind-address=127.0.0.1:${freePort()}`,
      ...flags,
    ]),
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  try {
    await untilServing(web);
    await sleep(2000);
    const idle = procFigures(proxy.pid);
    const run = async (connections: number, close: boolean): Promise<LoadRun> => {
      const direct = await wrk(http.port, connections, seconds, close);
      const before = procFigures(proxy.pid);
      let peak = before;
      const sampler = setInterval(() => {
        const now = procFigures(proxy.pid);
        peak = { fds: Math.max(peak.fds, now.fds), rssMiB: Math.max(peak.rssMiB, now.rssMiB) };
      }, 250);
      const proxied = await wrk(web, connections, seconds, close);
      clearInterval(sampler);
      const end = performance.now();
      let fdsBackS = -1;
      while (performance.now() - end < 20_000) {
        if (procFigures(proxy.pid).fds <= before.fds) {
          fdsBackS = (performance.now() - end) / 1000;
          break;
        }
        await sleep(100);
      }
      await sleep(Math.max(0, SETTLE_MS - (performance.now() - end)));
      return { direct, proxy: proxied, before, peak, after: procFigures(proxy.pid), fdsBackS };
    };
    // Warm-up for both paths.
    await wrk(http.port, 50, 2, false);
    await wrk(web, 50, 2, false);
    const keepAlive = await run(50, false);
    const newConnections = await run(50, true);
    const c1000 = await run(1000, false);
    const c5000 = await run(5000, false);
    const udpRuns: UdpRun[] = [];
    for (const rate of [10_000, 20_000, 50_000]) {
      udpRuns.push({
        rate,
        direct: await udp(echo.port, rate, 5),
        proxy: await udp(echoPort, rate, 5),
      });
    }
    return { seconds, keepAlive, newConnections, c1000, c5000, udp: udpRuns, idle };
  } finally {
    proxy.kill("SIGTERM");
    await proxy.status;
    await http.close();
    await echo.close();
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  const r = await benchUserspaceLoad(Number(Deno.args[0] ?? "10"), Deno.args.slice(1));
  Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify(r) + "\n"));
}
