/**
 * The dummy interface the ipvs mode binds service addresses to (`kube-ipvs0`), through `ip`:
 * created once, addresses read with `ip -o addr show dev`, changed in one `ip -force -batch -`
 * per sync (a failing line does not stop the others).
 * @module
 */
import { ExecError, type Executor } from "./executor.ts";
import { addressFamily } from "./ip.ts";

/** The interface upstream's ipvs proxier binds every service address to. */
export const KUBE_IPVS_INTERFACE = "kube-ipvs0";

/** The operations the ipvs mode needs on its dummy interface. */
export interface DummyLink {
  readonly name: string;
  /** Creates the interface (dummy, NOARP) unless it exists, and sets it up. */
  ensure(): Promise<void>;
  /** The addresses bound to it, without prefix; empty when it does not exist. */
  addresses(): Promise<string[]>;
  /** Binds and unbinds addresses in one batch. @throws {ExecError} with ip's messages. */
  apply(add: readonly string[], remove: readonly string[], signal?: AbortSignal): Promise<void>;
  /** Deletes the interface (and with it every address); nothing when it does not exist. */
  remove(): Promise<void>;
}

/** `addr add|del IP/32|128 dev NAME`, the address checked so nothing can be injected. */
export function addressLine(op: "add" | "del", ip: string, dev = KUBE_IPVS_INTERFACE): string {
  const f = addressFamily(ip);
  if (f === undefined) throw new ExecError(`ip: bad address ${JSON.stringify(ip)}`, -1);
  return `addr ${op} ${ip}/${f === "IPv4" ? 32 : 128} dev ${dev}`;
}

/** Parses `ip -o addr show dev NAME`: the addresses, without prefix. */
export function parseAddresses(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/\binet6? ([0-9a-fA-F:.]+)\/\d+/g)) {
    if (!m[1].startsWith("fe80:")) out.push(m[1]);
  }
  return out;
}

/** The dummy interface through `ip` and an executor. */
export class IpLinkRunner implements DummyLink {
  readonly name: string;
  readonly #exec: Executor;

  /** Runs nothing until asked. */
  constructor(opts: { exec: Executor; name?: string }) {
    this.#exec = opts.exec;
    this.name = opts.name ?? KUBE_IPVS_INTERFACE;
  }

  async #ip(
    args: string[],
    stdin?: string,
    signal?: AbortSignal,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return await this.#exec.run("ip", { args, stdin, signal });
  }

  /** @inheritdoc */
  async ensure(): Promise<void> {
    const show = await this.#ip(["-o", "link", "show", "dev", this.name]);
    if (show.code !== 0) {
      const add = await this.#ip(["link", "add", this.name, "type", "dummy"]);
      // Both families' proxiers ensure it; the other one may have just created it.
      if (add.code !== 0 && !/File exists/.test(add.stderr)) {
        throw new ExecError(
          `ip link add ${this.name} type dummy exited ${add.code}: ${add.stderr.trim()}`,
          add.code,
        );
      }
    }
    if (show.code !== 0 || !/[<,]UP[,>]/.test(show.stdout)) {
      const up = await this.#ip(["link", "set", this.name, "up"]);
      if (up.code !== 0) {
        throw new ExecError(`ip link set ${this.name} up exited ${up.code}: ${up.stderr.trim()}`, up.code);
      }
    }
  }

  /** @inheritdoc */
  async addresses(): Promise<string[]> {
    const r = await this.#ip(["-o", "addr", "show", "dev", this.name]);
    return r.code === 0 ? parseAddresses(r.stdout) : [];
  }

  /** @inheritdoc */
  async apply(add: readonly string[], remove: readonly string[], signal?: AbortSignal): Promise<void> {
    const lines = [
      ...remove.map((ip) => addressLine("del", ip, this.name)),
      ...add.map((ip) => addressLine("add", ip, this.name)),
    ];
    if (lines.length === 0) return;
    const r = await this.#ip(["-force", "-batch", "-"], lines.join("\n") + "\n", signal);
    if (r.code !== 0) {
      throw new ExecError(`ip -batch exited ${r.code}: ${r.stderr.trim().split("\n").join("; ")}`, r.code);
    }
  }

  /** @inheritdoc */
  async remove(): Promise<void> {
    const r = await this.#ip(["link", "del", this.name]);
    if (r.code !== 0 && !/Cannot find device|does not exist/.test(r.stderr)) {
      throw new ExecError(`ip link del ${this.name} exited ${r.code}: ${r.stderr.trim()}`, r.code);
    }
  }
}
