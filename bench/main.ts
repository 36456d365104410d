/**
 * `deno task bench`: prints every benchmark's figures with their conditions.
 * Usage: deno task bench [userspace] [iptables]   (default: all)
 * @module
 */
import { benchUserspace } from "./userspace.ts";

const which = new Set(Deno.args.length > 0 ? Deno.args : ["userspace", "iptables"]);
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(s + "\n"));
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

if (which.has("iptables")) {
  // Each size runs in its own process, so peak memory is per size. The kernel load is capped:
  // iptables-restore time grows faster than the rule count (nf_tables backend).
  const sizes: Array<[number, number]> = [[1000, 300], [10_000, 300], [50_000, 0]];
  out(`\n## iptables mode, N services x 10 endpoints, ClusterIP, one generator for all sizes`);
  out(
    "| services | build full restore input | lines | MiB | partial sync, 1 endpoint change (our work) | partial input lines | iptables-restore into a fresh netns | peak RSS MiB |",
  );
  out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
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
      } | ${j.partialMs} ms | ${j.partialLines} | ${kernel} | ${j.peakRssMiB} |`,
    );
  }
}
