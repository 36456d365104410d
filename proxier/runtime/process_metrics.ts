/**
 * The Prometheus process collector's metrics (`process_*`), as upstream kube-proxy exports them.
 * prom-client's own collector reads `/proc/self`, which Deno's permission model opens only to
 * `--allow-all`, and reports zeros then; these use what the shipped permissions allow, and the
 * `/proc` ones only when `/proc/self` is readable.
 * @module
 */
import { activeTimers, countTimers } from "./active_timers.ts";
import { Counter, Gauge, type Registry } from "./prometheus.ts";

/** Reads `/proc/self/<file>`; undefined when the permissions (or the OS) do not allow it. */
function procSelf(file: string): string | undefined {
  try {
    return Deno.readTextFileSync(`/proc/self/${file}`);
  } catch {
    return undefined;
  }
}

/**
 * The process's CPU time in microseconds: the runtime's own reading, the one `node:process`'s
 * cpuUsage returns (Deno's type declarations do not list it; importing `node:process` for it
 * would load the Node compatibility layer, about 9 MiB resident). Zero where a runtime lacks it.
 */
function cpuUsage(): { user: number; system: number } {
  const read = (Deno as unknown as { cpuUsage?: () => { user: number; system: number } }).cpuUsage;
  return typeof read === "function" ? read() : { user: 0, system: 0 };
}

/** Registers the process metrics on `registry`; each is read when `/metrics` is scraped. */
export function registerProcessMetrics(registry: Registry): void {
  countTimers();
  const registers = [registry];
  let reported = { user: 0, system: 0 };
  const cpu = () => {
    const u = cpuUsage();
    const now = { user: u.user / 1e6, system: u.system / 1e6 };
    const delta = { user: now.user - reported.user, system: now.system - reported.system };
    reported = now;
    return delta;
  };
  // The three CPU counters advance together, from one reading per scrape.
  let pending = { user: 0, system: 0 };
  new Counter({
    name: "process_cpu_seconds_total",
    help: "Total user and system CPU time spent in seconds.",
    registers,
    collect() {
      pending = cpu();
      this.inc(pending.user + pending.system);
    },
  });
  new Counter({
    name: "process_cpu_user_seconds_total",
    help: "Total user CPU time spent in seconds.",
    registers,
    collect() {
      this.inc(pending.user);
    },
  });
  new Counter({
    name: "process_cpu_system_seconds_total",
    help: "Total system CPU time spent in seconds.",
    registers,
    collect() {
      this.inc(pending.system);
    },
  });
  new Gauge({
    name: "process_resident_memory_bytes",
    help: "Resident memory size in bytes.",
    registers,
    collect() {
      this.set(Deno.memoryUsage().rss);
    },
  });
  new Gauge({
    name: "process_start_time_seconds",
    help: "Start time of the process since unix epoch in seconds.",
    registers,
    collect() {
      this.set(Math.round(performance.timeOrigin / 1000));
    },
  });
  // Node's prom-client names, for leak hunting on a long-running node: the V8 heap, and the
  // timers, sockets and other handles the process holds (a number that must stay flat).
  new Gauge({
    name: "nodejs_heap_size_total_bytes",
    help: "Process heap size from V8 in bytes.",
    registers,
    collect() {
      this.set(Deno.memoryUsage().heapTotal);
    },
  });
  new Gauge({
    name: "nodejs_heap_size_used_bytes",
    help: "Process heap size used from V8 in bytes.",
    registers,
    collect() {
      this.set(Deno.memoryUsage().heapUsed);
    },
  });
  new Gauge({
    name: "nodejs_external_memory_bytes",
    help: "Node.js external memory size in bytes.",
    registers,
    collect() {
      this.set(Deno.memoryUsage().external);
    },
  });
  new Gauge({
    name: "nodejs_active_resources",
    help:
      "Number of active resources that are currently keeping the event loop alive, grouped by async resource type.",
    labelNames: ["type"],
    registers,
    collect() {
      this.reset();
      for (const [type, n] of activeResources()) this.set({ type }, n);
    },
  });
  new Gauge({
    name: "nodejs_active_resources_total",
    help: "Total number of active resources.",
    registers,
    collect() {
      this.set([...activeResources().values()].reduce((a, b) => a + b, 0));
    },
  });
  if (procSelf("stat") === undefined) return;
  new Gauge({
    name: "process_virtual_memory_bytes",
    help: "Virtual memory size in bytes.",
    registers,
    collect() {
      // Field 23 of /proc/self/stat, counted after the parenthesised command name.
      const stat = procSelf("stat") ?? "";
      const vsize = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[20]);
      if (Number.isFinite(vsize)) this.set(vsize);
    },
  });
  new Gauge({
    name: "process_open_fds",
    help: "Number of open file descriptors.",
    registers,
    collect() {
      try {
        let n = 0;
        for (const _ of Deno.readDirSync("/proc/self/fd")) n++;
        this.set(n - 1); // the directory being read is itself one
      } catch { /* unreadable now */ }
    },
  });
  new Gauge({
    name: "process_max_fds",
    help: "Maximum number of open file descriptors.",
    registers,
    collect() {
      const m = /^Max open files\s+(\d+)/m.exec(procSelf("limits") ?? "");
      if (m !== null) this.set(Number(m[1]));
    },
  });
}

/** Active resources by type: the timers (Node's type name "Timeout"), see {@linkcode countTimers}. */
function activeResources(): Map<string, number> {
  return new Map([["Timeout", activeTimers()]]);
}
