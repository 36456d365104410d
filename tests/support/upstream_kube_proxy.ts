/**
 * Upstream kube-proxy (1.36) as a hand-over meets it on a node, written from its documented layout
 * (pkg/proxy/nftables/proxier.go: setupNFTables and the full sync; pkg/proxy/iptables/proxier.go:
 * the jump chains and the full restore; pkg/proxy/iptables/cleanup.go and CleanupLeftovers of the
 * nftables mode): what its start removes of the modes it does not run, and what its first full sync
 * writes for ClusterIP Services. It is a stand-in, not upstream: ClusterIP Services only, no partial
 * syncs, no comments on nft objects; what it writes, removes and leaves alone is what upstream does
 * for the same Services.
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import { hashPrefix } from "../../proxier/iptables/chain_name.ts";

/** One ClusterIP Service port and its ready endpoints (pod addresses). */
export interface UpstreamPort {
  readonly namespace: string;
  readonly name: string;
  readonly portName: string;
  readonly clusterIP: string;
  readonly port: number;
  readonly targetPort: number;
  readonly endpoints: readonly string[];
  /** The nftables stand-in only: the port's NodePort, external and load-balancer IPs. */
  readonly nodePort?: number;
  readonly externalIPs?: readonly string[];
  readonly loadBalancerIPs?: readonly string[];
  readonly sourceRanges?: readonly string[];
  /** The endpoints of `endpoints` on this node (hairpin entries; what the Local policies reach). */
  readonly localEndpoints?: readonly string[];
  /** externalTrafficPolicy Local. */
  readonly externalLocal?: boolean;
  /** internalTrafficPolicy Local. */
  readonly internalLocal?: boolean;
  /** The port's protocol (default tcp). */
  readonly protocol?: "tcp" | "udp";
  /** ClientIP affinity timeout in seconds. */
  readonly affinitySeconds?: number;
}

/** Which upstream, and with what: the mode, the cluster CIDR, the iptables backend it finds. */
export interface Upstream {
  readonly mode: "iptables" | "nftables";
  readonly clusterCIDR: string;
  /** The backend upstream's iptables wrapper picks: the one holding rules. */
  readonly backend: "nft" | "legacy";
}

const MARK = "0x4000";

async function run(exec: Executor, cmd: string, args: string[], stdin?: string): Promise<string> {
  const r = await exec.run(cmd, { args, stdin });
  if (r.code !== 0) {
    throw new Error(`upstream stand-in: ${cmd} ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  }
  return r.stdout;
}

/** Upstream's start: it removes the other modes' objects, then its first full sync writes `ports`. */
export async function upstreamStart(
  exec: Executor,
  up: Upstream,
  ports: readonly UpstreamPort[],
): Promise<void> {
  // Its nftables mode removes both other modes; its iptables and ipvs modes share chain names and
  // remove only the nftables mode's table.
  if (up.mode === "nftables") {
    await upstreamIpvsCleanup(exec, up.backend);
    await upstreamIptablesCleanup(exec, up.backend);
    const listed = await exec.run("nft", { args: ["-j", "list", "chains", "ip"] });
    const existing = listed.code !== 0
      ? []
      : (JSON.parse(listed.stdout).nftables as Array<{ chain?: { table: string; name: string } }>)
        .flatMap((o) => o.chain?.table === "kube-proxy" ? [o.chain.name] : []);
    await run(exec, "nft", ["-f", "-"], upstreamNftablesSync(ports, up.clusterCIDR, existing));
    // Its next sync, a second on (a deleted element may still point at a chain for that long),
    // deletes the service chains the full sync found stale and flushed.
    const stale = staleServiceChains(ports, existing);
    if (stale.length > 0) {
      await new Promise((r) => setTimeout(r, 1100));
      await run(exec, "nft", ["-f", "-"], stale.map((c) => `delete chain ip kube-proxy ${c}\n`).join(""));
    }
  } else {
    await upstreamNftablesCleanup(exec);
    await upstreamIptablesSync(exec, up, ports);
  }
}

/** The ipvs mode's ipsets (IPv6: `KUBE-6-`), as its cleanup names them. */
export const UPSTREAM_IPVS_SETS: readonly string[] = [
  "KUBE-LOOP-BACK",
  "KUBE-CLUSTER-IP",
  "KUBE-EXTERNAL-IP",
  "KUBE-EXTERNAL-IP-LOCAL",
  "KUBE-LOAD-BALANCER",
  "KUBE-LOAD-BALANCER-FW",
  "KUBE-LOAD-BALANCER-LOCAL",
  "KUBE-LOAD-BALANCER-SOURCE-IP",
  "KUBE-LOAD-BALANCER-SOURCE-CIDR",
  "KUBE-NODE-PORT-TCP",
  "KUBE-NODE-PORT-LOCAL-TCP",
  "KUBE-NODE-PORT-UDP",
  "KUBE-NODE-PORT-LOCAL-UDP",
  "KUBE-NODE-PORT-SCTP-HASH",
  "KUBE-NODE-PORT-LOCAL-SCTP-HASH",
  "KUBE-HEALTH-CHECK-NODE-PORT",
  "KUBE-IPVS-IPS",
].flatMap((n) => [n, n.replace(/^KUBE-/, "KUBE-6-").slice(0, 31)]);

/** The ipvs mode's iptables chains, by table. */
export const UPSTREAM_IPVS_CHAINS: Readonly<Record<"nat" | "filter", readonly string[]>> = {
  nat: ["KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-MARK-MASQ"],
  filter: [
    "KUBE-FORWARD",
    "KUBE-NODE-PORT",
    "KUBE-PROXY-FIREWALL",
    "KUBE-SOURCE-RANGES-FIREWALL",
    "KUBE-IPVS-FILTER",
    "KUBE-IPVS-OUT-FILTER",
  ],
};

const IPVS_JUMPS: ReadonlyArray<readonly [string, string, string]> = [
  ["nat", "OUTPUT", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`],
  ["nat", "PREROUTING", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`],
  ["nat", "POSTROUTING", `-m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`],
  ["filter", "FORWARD", `-m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`],
  ["filter", "INPUT", `-m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT`],
  ["filter", "INPUT", `-m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL`],
  ["filter", "FORWARD", `-m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL`],
  ["filter", "INPUT", `-m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER`],
  ["filter", "OUTPUT", `-m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER`],
];

/**
 * The ipvs mode's CleanupLeftovers, as upstream's other modes run it at start: every virtual server
 * flushed, kube-ipvs0 deleted, its jumps and chains removed on `backend`, its sets destroyed. What
 * the kernel lacks (no IPVS, no ipset) is skipped, as upstream skips it.
 */
export async function upstreamIpvsCleanup(exec: Executor, backend: "nft" | "legacy"): Promise<void> {
  const tryRun = (cmd: string, args: string[]) => exec.run(cmd, { args }).catch(() => undefined);
  await tryRun("ipvsadm", ["-C"]);
  await tryRun("ip", ["link", "del", "kube-ipvs0"]);
  for (const ipt of [`iptables-${backend}`, `ip6tables-${backend}`]) await ipvsChainsCleanup(exec, ipt);
  for (const set of UPSTREAM_IPVS_SETS) await tryRun("ipset", ["destroy", set]);
}

async function ipvsChainsCleanup(exec: Executor, ipt: string): Promise<void> {
  const tryRun = (cmd: string, args: string[]) => exec.run(cmd, { args }).catch(() => undefined);
  const held = (await run(exec, `${ipt}-save`, [])).split("\n").filter((l) => l.startsWith("*"));
  for (const [table, chain, rule] of IPVS_JUMPS) {
    if (held.includes(`*${table}`)) await tryRun(ipt, ["-t", table, "-D", chain, ...args(rule)]);
  }
  for (const table of ["nat", "filter"] as const) {
    if (!held.includes(`*${table}`)) continue;
    const existing = declared(await run(exec, `${ipt}-save`, ["-t", table]));
    const gone = UPSTREAM_IPVS_CHAINS[table].filter((c) => existing.includes(c));
    if (gone.length === 0) continue;
    const input = [
      `*${table}`,
      ...gone.map((c) => `:${c} - [0:0]`),
      ...gone.map((c) => `-X ${c}`),
      "COMMIT",
      "",
    ];
    // A chain another mode's rules still use (KUBE-MARK-MASQ) fails the table's restore: upstream
    // logs it and goes on, as here.
    await exec.run(`${ipt}-restore`, { args: ["--noflush"], stdin: input.join("\n") }).catch(() => undefined);
  }
}

/** The nftables mode's CleanupLeftovers: table `kube-proxy` goes whole, in each family that has it. */
export async function upstreamNftablesCleanup(exec: Executor): Promise<void> {
  for (const family of ["ip", "ip6"]) {
    await exec.run("nft", { args: ["delete", "table", family, "kube-proxy"] });
  }
}

const NAT_OWN = [
  "KUBE-SERVICES",
  "KUBE-NODEPORTS",
  "KUBE-POSTROUTING",
  "KUBE-MARK-MASQ",
  "KUBE-PROXY-CANARY",
];
const FILTER_OWN = [
  "KUBE-SERVICES",
  "KUBE-EXTERNAL-SERVICES",
  "KUBE-FORWARD",
  "KUBE-NODEPORTS",
  "KUBE-PROXY-FIREWALL",
  "KUBE-PROXY-CANARY",
];
const SERVICE_CHAIN = /^KUBE-(SVC|SVL|EXT|FW|SEP)-/;

/** Upstream's jumps from the built-in chains: table, chain, then the rule's arguments. */
const JUMPS: ReadonlyArray<readonly [string, string, string]> = [
  [
    "filter",
    "INPUT",
    `-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
  ],
  ["filter", "INPUT", `-m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`],
  [
    "filter",
    "INPUT",
    `-m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
  ],
  [
    "filter",
    "FORWARD",
    `-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
  ],
  ["filter", "FORWARD", `-m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`],
  [
    "filter",
    "FORWARD",
    `-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
  ],
  [
    "filter",
    "FORWARD",
    `-m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
  ],
  [
    "filter",
    "OUTPUT",
    `-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
  ],
  [
    "filter",
    "OUTPUT",
    `-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
  ],
  // Its localhost NodePorts' martian guard (IPv4), jumped to without a comment.
  ["filter", "INPUT", "-j KUBE-FIREWALL"],
  ["filter", "OUTPUT", "-j KUBE-FIREWALL"],
  ["nat", "OUTPUT", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`],
  ["nat", "PREROUTING", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`],
  ["nat", "POSTROUTING", `-m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`],
];

/** Splits a rule's arguments, keeping quoted ones whole. */
function args(rule: string): string[] {
  return [...rule.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]);
}

/** The chains an iptables-save of one table declares. */
function declared(saved: string): string[] {
  return saved.split("\n").filter((l) => l.startsWith(":")).map((l) => l.slice(1, l.indexOf(" ")));
}

/**
 * The iptables mode's CleanupLeftovers on one backend: its jumps deleted, its own nat and filter
 * chains and every per-service chain flushed and deleted in one restore per table, the mangle canary
 * deleted. Chains it does not name stay.
 */
export async function upstreamIptablesCleanup(exec: Executor, backend: "nft" | "legacy"): Promise<void> {
  for (const ipt of [`iptables-${backend}`, `ip6tables-${backend}`]) await iptablesChainsCleanup(exec, ipt);
}

async function iptablesChainsCleanup(exec: Executor, ipt: string): Promise<void> {
  // Its jump chains only: KUBE-FIREWALL and its jumps are kubelet's names too, and stay.
  for (const [table, chain, rule] of JUMPS.filter(([, , r]) => !r.endsWith("KUBE-FIREWALL"))) {
    await exec.run(ipt, { args: ["-t", table, "-D", chain, ...args(rule)] });
  }
  for (const [table, own] of [["nat", NAT_OWN], ["filter", FILTER_OWN]] as const) {
    const existing = declared(await run(exec, `${ipt}-save`, ["-t", table]));
    const gone = existing.filter((c) => own.includes(c) || (table === "nat" && SERVICE_CHAIN.test(c)));
    if (gone.length === 0) continue;
    const input = [
      `*${table}`,
      ...gone.map((c) => `:${c} - [0:0]`),
      ...gone.map((c) => `-X ${c}`),
      "COMMIT",
      "",
    ];
    await run(exec, `${ipt}-restore`, ["--noflush"], input.join("\n"));
  }
  await exec.run(ipt, { args: ["-t", "mangle", "-X", "KUBE-PROXY-CANARY"] });
}

/** `ns/name:port` and the per-port chain names upstream's iptables mode derives from it. */
function iptablesNames(p: UpstreamPort): { label: string; svc: string; sep: (ip: string) => string } {
  const label = `${p.namespace}/${p.name}:${p.portName}`;
  return {
    label,
    svc: `KUBE-SVC-${hashPrefix(label + "tcp")}`,
    sep: (ip) => `KUBE-SEP-${hashPrefix(label + "tcp" + `${ip}:${p.targetPort}`)}`,
  };
}

/**
 * The iptables mode's first full sync on `up.backend`: canaries, jumps ensured (inserted at the
 * top when missing), then one `--noflush` restore of filter and nat that rewrites its own chains
 * and deletes every per-service chain it did not write.
 */
export async function upstreamIptablesSync(
  exec: Executor,
  up: Upstream,
  ports: readonly UpstreamPort[],
): Promise<void> {
  const ipt = `iptables-${up.backend}`;
  for (const table of ["mangle", "nat", "filter"]) {
    await exec.run(ipt, { args: ["-t", table, "-N", "KUBE-PROXY-CANARY"] });
  }
  for (const [table, chain, rule] of JUMPS) {
    const a = args(rule);
    const own = a.at(-1)!;
    await exec.run(ipt, { args: ["-t", table, "-N", own] });
    if ((await exec.run(ipt, { args: ["-t", table, "-C", chain, ...a] })).code !== 0) {
      await run(exec, ipt, ["-t", table, "-I", chain, ...a]);
    }
  }
  const { natChains } = iptablesTables(up, ports);
  const stale = declared(await run(exec, `${ipt}-save`, ["-t", "nat"]))
    .filter((c) => SERVICE_CHAIN.test(c) && !natChains.includes(c));
  const { filter, nat } = iptablesTables(up, ports, stale);
  await run(exec, `${ipt}-restore`, ["--noflush"], [...filter, ...nat, ""].join("\n"));
}

/**
 * What the iptables mode's first restore holds: filter and nat, each from `*table` to `COMMIT`,
 * its own chains declared (flushed) and written, `stale` per-service chains deleted.
 */
function iptablesTables(up: Upstream, ports: readonly UpstreamPort[], stale: readonly string[] = []) {
  const natChains = ["KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"];
  const natRules = [
    `-A KUBE-POSTROUTING -m mark ! --mark ${MARK}/${MARK} -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --xor-mark ${MARK}`,
    `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
    `-A KUBE-MARK-MASQ -j MARK --or-mark ${MARK}`,
  ];
  for (const p of ports) {
    const n = iptablesNames(p);
    natChains.push(n.svc, ...p.endpoints.map(n.sep));
    const match = `-m tcp -p tcp -d ${p.clusterIP}/32 --dport ${p.port}`;
    natRules.push(`-A KUBE-SERVICES -m comment --comment "${n.label} cluster IP" ${match} -j ${n.svc}`);
    natRules.push(
      `-A ${n.svc} -m comment --comment "${n.label} cluster IP" ${match} ! -s ${up.clusterCIDR} -j KUBE-MARK-MASQ`,
    );
    p.endpoints.forEach((ip, i) => {
      const left = p.endpoints.length - i;
      const pick = left > 1 ? ` -m statistic --mode random --probability ${(1 / left).toFixed(10)}` : "";
      natRules.push(
        `-A ${n.svc} -m comment --comment "${n.label} -> ${ip}:${p.targetPort}"${pick} -j ${n.sep(ip)}`,
      );
      natRules.push(`-A ${n.sep(ip)} -m comment --comment ${n.label} -s ${ip}/32 -j KUBE-MARK-MASQ`);
      natRules.push(
        `-A ${
          n.sep(ip)
        } -m comment --comment ${n.label} -m tcp -p tcp -j DNAT --to-destination ${ip}:${p.targetPort}`,
      );
    });
  }
  natRules.push(
    `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
  );
  return {
    natChains,
    filter: [
      "*filter",
      ...[
        "KUBE-NODEPORTS",
        "KUBE-SERVICES",
        "KUBE-EXTERNAL-SERVICES",
        "KUBE-FIREWALL",
        "KUBE-FORWARD",
        "KUBE-PROXY-FIREWALL",
      ].map((c) => `:${c} - [0:0]`),
      `-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
      "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP",
      `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark ${MARK}/${MARK} -j ACCEPT`,
      `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
      "COMMIT",
    ],
    nat: [
      "*nat",
      ...[...natChains, ...stale].map((c) => `:${c} - [0:0]`),
      ...natRules,
      ...stale.map((c) => `-X ${c}`),
      "COMMIT",
    ],
  };
}

/**
 * What `iptables-save` prints after the iptables mode's first sync on a node without other rules:
 * the built-in chains with upstream's jumps at their top, then its own chains and rules.
 */
export function upstreamIptablesSave(up: Upstream, ports: readonly UpstreamPort[]): string {
  const { filter, nat } = iptablesTables(up, ports);
  const builtin: Record<string, string[]> = {
    filter: ["INPUT", "FORWARD", "OUTPUT"],
    nat: ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
  };
  const table = (name: "filter" | "nat", lines: string[]) => [
    lines[0],
    ...builtin[name].map((c) => `:${c} ACCEPT [0:0]`),
    ...lines.slice(1).filter((l) => l.startsWith(":")),
    // -I puts each jump at the top: the last ensured is first.
    ...JUMPS.filter(([t]) => t === name).reverse().map(([, chain, rule]) => `-A ${chain} ${rule}`),
    ...lines.slice(1).filter((l) => !l.startsWith(":")),
  ];
  return [...table("filter", filter), ...table("nat", nat), ""].join("\n");
}

/** The nftables mode's chain names for a port: `service-HASH-ns/name/proto/port` and its endpoints'. */
function nftNames(p: UpstreamPort): { svc: string; ep: (ip: string) => string } {
  const base = `${p.namespace}/${p.name}/${p.protocol ?? "tcp"}/${p.portName}`;
  const hash = (s: string) => hashPrefix(s).slice(0, 8);
  return {
    svc: `service-${hash(base)}-${base}`,
    ep: (ip) => `endpoint-${hash(`${base}__${ip}/${p.targetPort}`)}-${base}__${ip}/${p.targetPort}`,
  };
}

/** Of `existing`, the service and endpoint chains (names with a `/`) that `ports` no longer need. */
function staleServiceChains(ports: readonly UpstreamPort[], existing: readonly string[]): string[] {
  const active = new Set(ports.flatMap((p) => {
    const n = nftNames(p);
    return [
      n.svc,
      ...["external-", "local-", "firewall-"].map((k) => n.svc.replace(/^service-/, k)),
      ...p.endpoints.map(n.ep),
    ];
  }));
  return existing.filter((c) => c.includes("/") && !active.has(c));
}

/** What upstream's nftables mode knows of the node and cluster beyond the Services. */
export interface NftNode {
  /** The node's primary IPv4 address: `nodeport-ips` (1.36's default `--nodeport-addresses=primary`). */
  readonly nodeIP?: string;
  /** The IPv4 ServiceCIDR: traffic to its addresses no Service holds is dropped. */
  readonly serviceCIDR?: string;
}

/**
 * The nftables mode's first full sync as one `nft -f` transaction, both families (IPv6 without
 * Services): each table added (never replaced), its base chains deleted and recreated once (another
 * writer's hooks do not survive), its fixed chains flushed and rewritten, its maps and sets flushed
 * and refilled, the chains of every service port, and the service chains of `existing` it no longer
 * needs flushed (a later sync deletes them). Chains and maps it does not name stay as they were.
 * The layout, comments included, is 1.36's as `tests/testdata/upstream-1.36/nftables-mode.nft`
 * shows it.
 */
export function upstreamNftablesSync(
  ports: readonly UpstreamPort[],
  clusterCIDR: string,
  existing: readonly string[] = [],
  node: NftNode = {},
): string {
  const out = [
    ...nftFamily("ip", clusterCIDR, node),
    ...ports.flatMap((p) => nftServicePort("ip kube-proxy", p, clusterCIDR)),
    ...staleServiceChains(ports, existing).map((c) => `flush chain ip kube-proxy ${c}`),
    ...nftFamily("ip6", undefined, {}),
  ];
  return out.join("\n") + "\n";
}

/** One family's table, its sets, maps, base and fixed chains, with the sets and maps emptied. */
function nftFamily(fam: "ip" | "ip6", clusterCIDR: string | undefined, node: NftNode): string[] {
  const t = `${fam} kube-proxy`;
  const addr = fam === "ip" ? "ipv4_addr" : "ipv6_addr";
  const lo = fam === "ip" ? "127.0.0.0/8" : "::1";
  const base: Array<[string, string, string, string]> = [
    ["filter-prerouting-pre-dnat", "filter", "prerouting", "-110"],
    ["filter-output-pre-dnat", "filter", "output", "-110"],
    ["filter-input", "filter", "input", "0"],
    ["filter-forward", "filter", "forward", "0"],
    ["filter-output", "filter", "output", "0"],
    ["nat-prerouting", "nat", "prerouting", "-100"],
    ["nat-output", "nat", "output", "-100"],
    ["nat-postrouting", "nat", "postrouting", "100"],
  ];
  const out = [`add table ${t} { comment "rules for kube-proxy" ; }`];
  for (const [name] of base) out.push(`add chain ${t} ${name}`, `delete chain ${t} ${name}`);
  for (const [name, type, hook, prio] of base) {
    out.push(`add chain ${t} ${name} { type ${type} hook ${hook} priority ${prio}; policy accept; }`);
    out.push(`flush chain ${t} ${name}`);
  }
  const nodePortIPs = fam === "ip" && node.nodeIP !== undefined;
  const entry = `${addr} . inet_proto . inet_service`;
  out.push(
    `add set ${t} hairpin-connections { type ${addr} . ${addr} . inet_proto . inet_service ; comment "service hairpin connections" ; }`,
    `add set ${t} cluster-ips { type ${addr} ; comment "Active ClusterIPs" ; }`,
    ...(nodePortIPs
      ? [`add set ${t} nodeport-ips { type ${addr} ; comment "IPs that accept NodePort traffic" ; }`]
      : []),
    `add map ${t} no-endpoint-services { type ${entry} : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }`,
    `add map ${t} no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }`,
    `add map ${t} firewall-ips { type ${entry} : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }`,
    `add map ${t} service-ips { type ${entry} : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`,
    `add map ${t} service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }`,
  );
  const fixed = [
    "nodeport-endpoints-check",
    "service-endpoints-check",
    "firewall-check",
    "services",
    "masquerading",
    "cluster-ips-check",
  ];
  for (const c of fixed) out.push(`add chain ${t} ${c}`, `flush chain ${t} ${c}`);
  out.push(
    `add chain ${t} reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }`,
    `flush chain ${t} reject-chain`,
  );
  const key = `${fam} daddr . meta l4proto . th dport`;
  const nodePorts = nodePortIPs
    ? `${fam} daddr @nodeport-ips meta l4proto . th dport`
    : `${fam} daddr != ${lo} meta l4proto . th dport`;
  const rules: Array<[string, string]> = [
    ["filter-prerouting-pre-dnat", "ct state new jump firewall-check"],
    ["filter-output-pre-dnat", "ct state new jump firewall-check"],
    ["filter-input", "ct state new jump nodeport-endpoints-check"],
    ["filter-input", "ct state new jump service-endpoints-check"],
    ["filter-forward", "ct state new jump service-endpoints-check"],
    ["filter-forward", "ct state new jump cluster-ips-check"],
    ["filter-output", "ct state new jump service-endpoints-check"],
    ["filter-output", "ct state new jump cluster-ips-check"],
    ["nat-prerouting", "jump services"],
    ["nat-output", "jump services"],
    ["nat-postrouting", "jump masquerading"],
    ["nodeport-endpoints-check", `${nodePorts} vmap @no-endpoint-nodeports`],
    ["service-endpoints-check", `${key} vmap @no-endpoint-services`],
    ["firewall-check", `${key} vmap @firewall-ips`],
    ...(clusterCIDR === undefined ? [] : [[
      "services",
      `${fam} daddr @cluster-ips ${fam} saddr != ${clusterCIDR} meta mark set meta mark | ${MARK} comment "masquerade clusterIP traffic from outside cluster"`,
    ] as [string, string]]),
    ["services", `${key} vmap @service-ips`],
    [
      "services",
      nodePortIPs
        ? `${nodePorts} vmap @service-nodeports`
        : `fib daddr type local ${nodePorts} vmap @service-nodeports`,
    ],
    [
      "masquerading",
      `meta mark & ${MARK} != 0 meta mark set meta mark ^ ${MARK} masquerade fully-random`,
    ],
    [
      "masquerading",
      `ct status dnat ${fam} saddr . ${fam} daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random`,
    ],
    [
      "cluster-ips-check",
      `${fam} daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"`,
    ],
    ...(fam === "ip" && node.serviceCIDR !== undefined
      ? [[
        "cluster-ips-check",
        `${fam} daddr ${node.serviceCIDR} drop comment "Drop traffic to unallocated ClusterIPs"`,
      ] as [string, string]]
      : []),
    ["reject-chain", "reject"],
  ];
  for (const [chain, rule] of rules) out.push(`add rule ${t} ${chain} ${rule}`);
  for (const set of ["hairpin-connections", "cluster-ips", ...(nodePortIPs ? ["nodeport-ips"] : [])]) {
    out.push(`flush set ${t} ${set}`);
  }
  for (
    const map of [
      "no-endpoint-services",
      "no-endpoint-nodeports",
      "firewall-ips",
      "service-ips",
      "service-nodeports",
    ]
  ) {
    out.push(`flush map ${t} ${map}`);
  }
  if (nodePortIPs) out.push(`add element ${t} nodeport-ips { ${node.nodeIP} }`);
  return out;
}

/**
 * One service port's chains and elements in upstream 1.36's nftables layout: `service-` DNATs
 * straight through an anonymous `numgen` map (with ClientIP affinity: its affinity sets, then
 * `endpoint-` chains that record the client); `external-` (the Cluster policy marks for
 * masquerading; the Local policy short-circuits pods and the node, then `local-`); internal
 * traffic policy Local reaches `local-` from the cluster IP; `firewall-` for source ranges; the
 * no-endpoint verdicts with the port's name; hairpin entries for the endpoints on this node.
 */
function nftServicePort(t: string, p: UpstreamPort, clusterCIDR: string): string[] {
  const out: string[] = [];
  const n = nftNames(p);
  const proto = p.protocol ?? "tcp";
  const label = `${p.namespace}/${p.name}:${p.portName}`;
  const rule = (chain: string, text: string) => out.push(`add rule ${t} ${chain} ${text}`);
  const chain = (name: string) => out.push(`add chain ${t} ${name}`, `flush chain ${t} ${name}`);
  const affinity = (ip: string) => n.ep(ip).replace(/^endpoint-/, "affinity-");
  const local = p.localEndpoints ?? [];
  /** Writes chain `c`, which sends new connections to one of `eps`. */
  const balance = (c: string, eps: readonly string[]) => {
    chain(c);
    if (p.affinitySeconds !== undefined) {
      for (const ip of eps) rule(c, `ip saddr @${affinity(ip)} goto ${n.ep(ip)}`);
      rule(
        c,
        `numgen random mod ${eps.length} vmap { ${
          eps.map((ip, i) => `${i} : goto ${n.ep(ip)}`).join(", ")
        } }`,
      );
      return;
    }
    rule(
      c,
      `meta l4proto ${proto} dnat ip to numgen random mod ${eps.length} map { ${
        eps.map((ip, i) => `${i} : ${ip} . ${p.targetPort}`).join(", ")
      } }`,
    );
  };
  const entries = [
    ...(p.externalIPs ?? []).map((ip) => `${ip} . ${proto} . ${p.port}`),
    ...(p.loadBalancerIPs ?? []).map((ip) => `${ip} . ${proto} . ${p.port}`),
  ];
  const clusterEntry = `${p.clusterIP} . ${proto} . ${p.port}`;
  const noEndpoints = (e: string, verdict: string) =>
    out.push(`add element ${t} no-endpoint-services { ${e} comment "${label}" : ${verdict} }`);
  const noNodePort = (verdict: string) =>
    out.push(
      `add element ${t} no-endpoint-nodeports { ${proto} . ${p.nodePort} comment "${label}" : ${verdict} }`,
    );
  out.push(`add element ${t} cluster-ips { ${p.clusterIP} }`);
  for (const ip of local) {
    out.push(`add element ${t} hairpin-connections { ${ip} . ${ip} . ${proto} . ${p.targetPort} }`);
  }
  if (p.endpoints.length === 0) {
    for (const e of [clusterEntry, ...entries]) noEndpoints(e, "goto reject-chain");
    if (p.nodePort !== undefined) noNodePort("goto reject-chain");
    return out;
  }
  if (p.affinitySeconds !== undefined) {
    for (const ip of p.endpoints) {
      out.push(
        `add set ${t} ${
          affinity(ip)
        } { type ipv4_addr ; flags dynamic,timeout ; timeout ${p.affinitySeconds}s ; }`,
      );
      chain(n.ep(ip));
      rule(n.ep(ip), `update @${affinity(ip)} { ip saddr }`);
      rule(n.ep(ip), `meta l4proto ${proto} dnat to ${ip}:${p.targetPort}`);
    }
  }
  const localChain = n.svc.replace(/^service-/, "local-");
  if (p.internalLocal === true) {
    if (local.length > 0) {
      balance(localChain, local);
      out.push(`add element ${t} service-ips { ${clusterEntry} : goto ${localChain} }`);
    } else noEndpoints(clusterEntry, "drop");
  } else {
    balance(n.svc, p.endpoints);
    out.push(`add element ${t} service-ips { ${clusterEntry} : goto ${n.svc} }`);
  }
  if (entries.length === 0 && p.nodePort === undefined) return out;
  const external = n.svc.replace(/^service-/, "external-");
  chain(external);
  if (p.externalLocal !== true) {
    rule(external, `meta mark set meta mark | ${MARK} comment "masquerade"`);
    rule(external, `goto ${n.svc}`);
  } else {
    rule(external, `ip saddr ${clusterCIDR} goto ${n.svc} comment "short-circuit pod traffic"`);
    rule(
      external,
      `fib saddr type local meta mark set meta mark | ${MARK} comment "masquerade local traffic"`,
    );
    rule(external, `fib saddr type local goto ${n.svc} comment "short-circuit local traffic"`);
    if (local.length > 0) {
      if (p.internalLocal !== true) balance(localChain, local);
      rule(external, `goto ${localChain}`);
    } else {
      for (const e of entries) noEndpoints(e, "drop");
      if (p.nodePort !== undefined) noNodePort("drop");
    }
  }
  for (const e of entries) out.push(`add element ${t} service-ips { ${e} : goto ${external} }`);
  if (p.nodePort !== undefined) {
    out.push(`add element ${t} service-nodeports { ${proto} . ${p.nodePort} : goto ${external} }`);
  }
  if ((p.sourceRanges ?? []).length > 0) {
    const firewall = n.svc.replace(/^service-/, "firewall-");
    chain(firewall);
    rule(firewall, `ip saddr != { ${p.sourceRanges!.join(", ")} } drop`);
    for (const ip of p.loadBalancerIPs ?? []) {
      out.push(`add element ${t} firewall-ips { ${ip} . ${proto} . ${p.port} : goto ${firewall} }`);
    }
  }
  return out;
}

/** A Kubernetes object as a `kubectl get -o yaml` List holds it (the fields the converter reads). */
// deno-lint-ignore no-explicit-any
type Obj = any;

/**
 * The IPv4 service ports of `objects` (YAML documents or Lists of Services and EndpointSlices) as
 * upstream's proxier on node `nodeName` holds them: ready endpoints, else serving+terminating ones;
 * those on `nodeName` local; headless and ExternalName Services left out.
 */
export function upstreamPortsOf(docs: readonly unknown[], nodeName: string): UpstreamPort[] {
  const items: Obj[] = docs.flatMap((d: Obj) => d?.kind?.endsWith("List") ? d.items : [d]);
  const slices = items.filter((o) => o?.kind === "EndpointSlice" && o.addressType === "IPv4");
  const out: UpstreamPort[] = [];
  for (const svc of items.filter((o) => o?.kind === "Service")) {
    const spec = svc.spec;
    if (spec.type === "ExternalName" || spec.clusterIP === "None" || spec.clusterIP === undefined) continue;
    const mine = slices.filter((s) =>
      s.metadata.namespace === svc.metadata.namespace &&
      s.metadata.labels?.["kubernetes.io/service-name"] === svc.metadata.name
    );
    for (const port of spec.ports) {
      const eps: Array<{ ip: string; port: number; ready: boolean; serving: boolean; local: boolean }> = [];
      for (const s of mine) {
        const target = s.ports?.find((p: Obj) => (p.name ?? "") === (port.name ?? ""));
        if (target === undefined) continue;
        for (const e of s.endpoints ?? []) {
          const c = e.conditions ?? {};
          eps.push({
            ip: e.addresses[0],
            port: target.port,
            ready: c.ready !== false,
            serving: c.serving ?? c.ready !== false,
            local: e.nodeName === nodeName,
          });
        }
      }
      // Upstream keeps a port's endpoints sorted by their `ip:port` text.
      eps.sort((a, b) => (`${a.ip}:${a.port}` < `${b.ip}:${b.port}` ? -1 : 1));
      const ready = eps.filter((e) => e.ready);
      const used = ready.length > 0 ? ready : eps.filter((e) => e.serving);
      out.push({
        namespace: svc.metadata.namespace,
        name: svc.metadata.name,
        portName: port.name ?? "",
        protocol: port.protocol === "UDP" ? "udp" : "tcp",
        clusterIP: spec.clusterIP,
        port: port.port,
        targetPort: used[0]?.port ?? (typeof port.targetPort === "number" ? port.targetPort : port.port),
        endpoints: used.map((e) => e.ip),
        localEndpoints: used.filter((e) => e.local).map((e) => e.ip),
        ...(port.nodePort === undefined ? {} : { nodePort: port.nodePort }),
        externalIPs: spec.externalIPs ?? [],
        loadBalancerIPs: (svc.status?.loadBalancer?.ingress ?? []).map((i: Obj) => i.ip).filter(Boolean),
        sourceRanges: spec.loadBalancerSourceRanges ?? [],
        externalLocal: spec.externalTrafficPolicy === "Local" &&
          (spec.type === "NodePort" || spec.type === "LoadBalancer" || (spec.externalIPs ?? []).length > 0),
        internalLocal: spec.internalTrafficPolicy === "Local",
        ...(spec.sessionAffinity === "ClientIP"
          ? { affinitySeconds: spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? 10800 }
          : {}),
      });
    }
  }
  return out;
}
