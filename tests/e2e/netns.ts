/**
 * Network namespaces for end-to-end tests. Every name carries a random run id; everything is
 * removed in `close()`, which tests call from `finally`. Nothing here touches the host's own
 * interfaces or rules: commands run inside the namespaces via `ip netns exec`.
 * @module
 */

import { ProxyProcess, startArgs } from "../support/program.ts";
import { sh } from "../support/namespace.ts";
import { Unrecoverable } from "../support/net_helpers.ts";
import { ANSWER_MS, IN_VM } from "../support/bounds.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

/**
 * A request's default bound (a datagram's, half of it): 2 s on the host; in the emulated guest,
 * where a connection through the program's rules can take seconds, {@linkcode ANSWER_MS}. A check
 * that expects no answer passes its own, short bound.
 */
const WAIT_MS = IN_VM ? ANSWER_MS : 2000;

/** A JSON-lines helper process (`agent.ts`) running inside a namespace. */
export class Agent {
  readonly #ns: string;
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: AsyncIterator<string>;
  #queue: Promise<unknown> = Promise.resolve();

  /** Starts the agent in `ns`. */
  constructor(ns: string) {
    this.#ns = ns;
    this.#child = new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        ns,
        Deno.execPath(),
        "run",
        "--unstable-net",
        "-A",
        `${ROOT}tests/e2e/agent.ts`,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#lines = this.#child.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(lineSplitter())[
      Symbol.asyncIterator
    ]();
  }

  /** Sends one command and returns its JSON answer; commands are serialized. */
  request(
    cmd: Record<string, unknown>,
  ): Promise<{ ok: boolean; data?: string; error?: string; status?: number }> {
    const p = this.#queue.then(async () => {
      await this.#writer.write(new TextEncoder().encode(JSON.stringify(cmd) + "\n"));
      const r = await this.#lines.next();
      if (r.done) {
        const { code, signal } = await this.#child.status;
        throw new Unrecoverable(`the agent in ${this.#ns} exited (code ${code}, signal ${signal})`);
      }
      return JSON.parse(r.value);
    });
    this.#queue = p.catch(() => {});
    return p;
  }

  /** TCP request: what the server answered, or `ERR <reason>`. */
  async tcp(host: string, port: number, timeoutMs = WAIT_MS): Promise<string> {
    const r = await this.request({ op: "tcp", host, port, timeoutMs });
    return r.ok ? r.data! : `ERR ${r.error}`;
  }

  /** UDP request: the reply text, or `ERR <reason>`. */
  async udp(
    host: string,
    port: number,
    opts: { srcPort?: number; srcHost?: string; timeoutMs?: number } = {},
  ): Promise<string> {
    const r = await this.request({
      op: "udp",
      host,
      port,
      timeoutMs: opts.timeoutMs ?? WAIT_MS / 2,
      srcPort: opts.srcPort ?? 0,
      ...(opts.srcHost === undefined ? {} : { srcHost: opts.srcHost }),
    });
    return r.ok ? r.data! : `ERR ${r.error}`;
  }

  /** Connects and returns the first chunk the server sends, or `ERR <reason>`. */
  async hello(host: string, port: number, timeoutMs = WAIT_MS): Promise<string> {
    const r = await this.request({ op: "hello", host, port, timeoutMs });
    return r.ok ? r.data! : `ERR ${r.error}`;
  }

  /** Opens a connection kept as `id`; returns its first chunk, or `ERR <reason>`. */
  async open(id: string, host: string, port: number, timeoutMs = WAIT_MS): Promise<string> {
    const r = await this.request({ op: "open", id, host, port, timeoutMs });
    return r.ok ? r.data! : `ERR ${r.error}`;
  }

  /** Sends `data` on kept connection `id`; returns the reply chunk, or `ERR <reason>`. */
  async say(id: string, data: string, timeoutMs = WAIT_MS): Promise<string> {
    const r = await this.request({ op: "say", id, data, timeoutMs });
    return r.ok ? r.data! : `ERR ${r.error}`;
  }

  /** HTTP GET `path`: `status body`, or `ERR <reason>`. */
  async http(host: string, port: number, timeoutMs = WAIT_MS, path = "/"): Promise<string> {
    const r = await this.request({ op: "http", host, port, timeoutMs, path });
    return r.ok ? `${r.status} ${r.data}` : `ERR ${r.error}`;
  }

  /** Stops the agent. */
  async close(): Promise<void> {
    try {
      await this.#writer.close();
    } catch { /* gone */ }
    try {
      this.#child.kill("SIGKILL");
    } catch { /* gone */ }
    await this.#child.status;
  }
}

function lineSplitter(): TransformStream<string, string> {
  let rest = "";
  return new TransformStream({
    transform(chunk, ctrl) {
      rest += chunk;
      let nl;
      while ((nl = rest.indexOf("\n")) >= 0) {
        ctrl.enqueue(rest.slice(0, nl));
        rest = rest.slice(nl + 1);
      }
    },
  });
}

/** One pod: its namespace, IP and agent. */
export interface Pod {
  readonly ns: string;
  readonly ip: string;
  readonly agent: Agent;
}

/**
 * A test topology: one "node" namespace; pods on veth pairs into the node (10.180.N.2, gateway
 * 10.180.N.1 on the node); "client" hosts on a shared link with the node (node 192.168.0.2,
 * clients 192.168.0.N), routing service and external IPs through the node.
 */
export class Topology {
  readonly id = crypto.randomUUID().replaceAll("-", "").slice(0, 6);
  readonly node = `kpd-${this.id}-node`;
  readonly nodeIP = "192.168.0.2";
  readonly pods: Pod[] = [];
  readonly clients: Pod[] = [];
  readonly #namespaces: string[] = [];
  readonly #agents: Agent[] = [];
  readonly #procs: ProxyProcess[] = [];
  #nodeAgent?: Agent;
  #bridgePods = 0;

  /** Creates the node namespace with loopback up and forwarding on. */
  async init(): Promise<void> {
    await this.#addNs(this.node);
    await this.exec(this.node, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // The node's external link; like a real node, it has a default route (service IPs are
    // routed before NAT, so without one the kernel answers "network unreachable").
    await this.exec(this.node, ["ip", "link", "add", "br0", "type", "bridge"]);
    await this.exec(this.node, ["ip", "addr", "add", `${this.nodeIP}/24`, "dev", "br0"]);
    await this.exec(this.node, ["ip", "link", "set", "br0", "up"]);
    await this.exec(this.node, [
      "ip",
      "route",
      "add",
      "default",
      "via",
      "192.168.0.1",
      "dev",
      "br0",
      "onlink",
    ]);
  }

  /** Runs a command inside a namespace. */
  exec(ns: string, args: string[], opts: { allowFail?: boolean } = {}): Promise<string> {
    return sh("ip", ["netns", "exec", ns, ...args], opts);
  }

  /** The agent in the node namespace. */
  get nodeAgent(): Agent {
    return this.#nodeAgent ??= this.#agent(this.node);
  }

  /** Adds a pod namespace with a backend answering `name` on `port` (TCP and UDP). */
  async addPod(name: string, port: number): Promise<Pod> {
    const n = this.pods.length + 1;
    const ns = `kpd-${this.id}-p${n}`;
    await this.#addNs(ns);
    const host = `kp${this.id}h${n}`;
    await this.#vethPair(host, ns);
    await this.exec(this.node, ["ip", "addr", "add", `10.180.${n}.1/24`, "dev", host]);
    await this.exec(this.node, ["ip", "link", "set", host, "up"]);
    await this.exec(ns, ["ip", "addr", "add", `10.180.${n}.2/24`, "dev", "eth0"]);
    await this.exec(ns, ["ip", "link", "set", "eth0", "up"]);
    await this.exec(ns, ["ip", "route", "add", "default", "via", `10.180.${n}.1`]);
    const agent = this.#agent(ns);
    const r = await agent.request({ op: "serve", name, port });
    if (!r.ok) throw new Error(`backend ${name}: ${r.error}`);
    const pod = { ns, ip: `10.180.${n}.2`, agent };
    this.pods.push(pod);
    return pod;
  }

  /**
   * Adds a pod on a bridge in the node namespace (`bridge`, 10.181.0.1/24, made by the first such
   * pod), as CNI bridge plugins attach pods: 10.181.0.N, gateway the bridge; its agent serves
   * nothing until asked.
   */
  async addBridgePod(bridge: string): Promise<Pod> {
    const n = this.#bridgePods + 2;
    if (this.#bridgePods++ === 0) {
      await this.exec(this.node, ["ip", "link", "add", bridge, "type", "bridge"]);
      await this.exec(this.node, ["ip", "addr", "add", "10.181.0.1/24", "dev", bridge]);
      await this.exec(this.node, ["ip", "link", "set", bridge, "up"]);
    }
    const ns = `kpd-${this.id}-b${n}`;
    await this.#addNs(ns);
    const port = `kp${this.id}b${n}`;
    await this.#vethPair(port, ns);
    await this.exec(this.node, ["ip", "link", "set", port, "master", bridge]);
    await this.exec(this.node, ["ip", "link", "set", port, "up"]);
    await this.exec(ns, ["ip", "addr", "add", `10.181.0.${n}/24`, "dev", "eth0"]);
    await this.exec(ns, ["ip", "link", "set", "eth0", "up"]);
    await this.exec(ns, ["ip", "route", "add", "default", "via", "10.181.0.1"]);
    return { ns, ip: `10.181.0.${n}`, agent: this.#agent(ns) };
  }

  /**
   * Adds a second node namespace on the external link (192.168.0.3), routing pod traffic through
   * the first node; returns its namespace name and agent.
   */
  async addSecondNode(): Promise<Pod> {
    const ns = `kpd-${this.id}-node2`;
    await this.#addBridgedHost(ns, `kp${this.id}n2`, "192.168.0.3");
    await this.exec(ns, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    return { ns, ip: "192.168.0.3", agent: this.#agent(ns) };
  }

  /** Adds a client host on the node's external link (192.168.0.N, N >= 10). */
  async addClient(): Promise<Pod> {
    const n = this.clients.length + 10;
    const ns = `kpd-${this.id}-c${n}`;
    await this.#addBridgedHost(ns, `kp${this.id}c${n}`, `192.168.0.${n}`);
    const c = { ns, ip: `192.168.0.${n}`, agent: this.#agent(ns) };
    this.clients.push(c);
    return c;
  }

  /** Creates a veth pair: `hostSide` in the node namespace, `eth0` in `ns`. */
  #vethPair(hostSide: string, ns: string): Promise<string> {
    return sh("ip", [
      "link",
      "add",
      hostSide,
      "netns",
      this.node,
      "type",
      "veth",
      "peer",
      "name",
      "eth0",
      "netns",
      ns,
    ]);
  }

  /** Creates `ns` with eth0 = `ip`/24 on the node's bridge, default route via the node. */
  async #addBridgedHost(ns: string, port: string, ip: string): Promise<void> {
    await this.#addNs(ns);
    await this.#vethPair(port, ns);
    await this.exec(this.node, ["ip", "link", "set", port, "master", "br0"]);
    await this.exec(this.node, ["ip", "link", "set", port, "up"]);
    await this.exec(ns, ["ip", "addr", "add", `${ip}/24`, "dev", "eth0"]);
    await this.exec(ns, ["ip", "link", "set", "eth0", "up"]);
    await this.exec(ns, ["ip", "route", "add", "default", "via", this.nodeIP]);
  }

  /**
   * Starts the real program entry point inside `ns` exactly as `deno task start` does (deno.json's
   * permission set, no -A). Its stderr is collected as it arrives, so the log can be read at any
   * time, including while it still runs.
   */
  startProxy(args: string[], ns = this.node, env?: Record<string, string>): ProxyProcess {
    const child = new Deno.Command("ip", {
      args: this.#programArgs(ns, args),
      env,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const p = new ProxyProcess(child);
    this.#procs.push(p);
    return p;
  }

  /** `ip netns exec` arguments that run main.ts in `ns` with deno.json's permission set. */
  #programArgs(ns: string, args: string[]): string[] {
    return ["netns", "exec", ns, Deno.execPath(), ...startArgs(args)];
  }

  /** Runs the program to completion inside `ns` (e.g. `--cleanup`); returns its exit code and output. */
  async runProgram(
    args: string[],
    ns = this.node,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    const out = await new Deno.Command("ip", {
      args: this.#programArgs(ns, args),
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  }

  /** Stops everything and deletes every namespace (and so every interface and rule in them). */
  async close(): Promise<void> {
    for (const p of this.#procs) await p.stop("SIGKILL");
    await Promise.all(this.#agents.map((a) => a.close()));
    for (const ns of this.#namespaces.reverse()) await sh("ip", ["netns", "del", ns], { allowFail: true });
  }

  #agent(ns: string): Agent {
    const a = new Agent(ns);
    this.#agents.push(a);
    return a;
  }

  async #addNs(ns: string): Promise<void> {
    await sh("ip", ["netns", "add", ns]);
    this.#namespaces.push(ns);
    await this.exec(ns, ["ip", "link", "set", "lo", "up"]);
  }
}
