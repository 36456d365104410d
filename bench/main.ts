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
