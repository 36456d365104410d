/**
 * The conntrack reconciler at scale: `deno run -A bench/conntrack.ts [FLOWS]` fills a fresh network
 * namespace's conntrack table with FLOWS UDP flows (default 10,000: 1,000 UDP Services x 10 endpoints,
 * 10 flows each, DNATed as the kernel would), then times the reconciler as a sync runs it: the
 * kernel's floor (`conntrack -L` alone), a reconcile with nothing stale, one after one endpoint of
 * one Service went away, and one after 100 endpoints of 100 Services did. Prints one JSON line.
 * @module
 */
import { ConntrackRunner, STDIN_FILE } from "../iptables/conntrack.ts";
import { reconcileConntrack } from "../proxier/conntrack/reconciler.ts";
import type { EndpointInfo, EndpointsMap, ServicePortInfo, ServicePortMap } from "../proxier/model/types.ts";
import { withNamespace } from "../tests/support/namespace.ts";

const flows = Number(Deno.args[0] ?? "10000");
const services = Math.max(1, Math.round(flows / 10));
const ip = (base: string, i: number) => `${base}.${(i >> 8) & 255}.${i & 255}`;

/** Service s: cluster IP 172.30.x.y:53/UDP; endpoint e of it: 10.180+ ... :53. */
function model(
  drop: (s: number, e: number) => boolean,
): { services: ServicePortMap; endpoints: EndpointsMap } {
  const svcs: ServicePortMap = new Map();
  const eps: EndpointsMap = new Map();
  for (let s = 0; s < services; s++) {
    const key = `bench/svc-${s}:dns/UDP`;
    const info = {
      name: { namespace: "bench", name: `svc-${s}`, port: "dns", protocol: "UDP" },
      service: `bench/svc-${s}`,
      clusterIP: ip("172.30", s),
      port: 53,
      protocol: "UDP",
      nodePort: 0,
      externalIPs: [],
      loadBalancerIPs: [],
    } as unknown as ServicePortInfo;
    svcs.set(key, info);
    const list: EndpointInfo[] = [];
    for (let e = 0; e < 10; e++) {
      if (drop(s, e)) continue;
      const addr = ip(`10.${180 + (e >> 1)}`, s * 2 + (e & 1));
      list.push({ ip: addr, port: 53, ready: true, serving: true, terminating: false } as EndpointInfo);
    }
    eps.set(key, list);
  }
  return { services: svcs, endpoints: eps };
}

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const result = await withNamespace(async (exec) => {
  const { endpoints } = model(() => false);
  const lines: string[] = [];
  let n = 0;
  for (let s = 0; s < services && n < flows; s++) {
    const eps = endpoints.get(`bench/svc-${s}:dns/UDP`)!;
    for (let f = 0; f < 10 && n < flows; f++, n++) {
      const ep = eps[f % eps.length];
      const sport = 20000 + f;
      lines.push(
        `-I -p udp -s ${ip("10.1", s)} -d ${ip("172.30", s)} --sport ${sport} --dport 53 -r ${ep.ip} -q ${
          ip("10.1", s)
        } --reply-port-src 53 --reply-port-dst ${sport} -t 600`,
      );
    }
  }
  const filled = await exec.run("conntrack", {
    args: ["-R", STDIN_FILE],
    stdin: lines.join("\n") + "\n",
  });
  if (filled.code !== 0) throw new Error(`conntrack -R: ${filled.stderr}`);
  const ct = new ConntrackRunner({ exec, family: "IPv4" });
  const floor: number[] = [];
  const steady: number[] = [];
  let listed = 0;
  for (let i = 0; i < 5; i++) {
    let t = performance.now();
    listed = (await ct.list("udp")).length;
    floor.push(performance.now() - t);
    t = performance.now();
    const r = await reconcileConntrack(ct, { ...model(() => false), removed: [] });
    steady.push(performance.now() - t);
    if (r.deleted !== 0) throw new Error(`nothing is stale, yet ${r.deleted} deleted`);
  }
  // One endpoint of one Service goes (a pod replaced), then the first endpoint of every 10th.
  let t = performance.now();
  const one = await reconcileConntrack(ct, { ...model((s, e) => s === 1 && e === 0), removed: [] });
  const oneMs = performance.now() - t;
  t = performance.now();
  const r = await reconcileConntrack(ct, {
    ...model((s, e) => (s === 1 || s % 10 === 0) && e === 0),
    removed: [],
  });
  const staleMs = performance.now() - t;
  const left = (await ct.list("udp")).length;
  return {
    flows: listed,
    services,
    listFloorMs: Math.round(median(floor) * 10) / 10,
    reconcileNothingStaleMs: Math.round(median(steady) * 10) / 10,
    reconcileOneStaleMs: Math.round(oneMs * 10) / 10,
    deletedOne: one.deleted,
    reconcileStaleMs: Math.round(staleMs * 10) / 10,
    deleted: r.deleted,
    left,
  };
});
console.log(JSON.stringify(result));
