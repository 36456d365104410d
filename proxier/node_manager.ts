/**
 * This proxy's own Node, as upstream's `pkg/proxy/node.go` (NodeManager): the first sync waits for
 * it (with the API source) so node addresses and pod CIDRs are right from the first rule; then it
 * answers what the rules read of it: the node's zone, its addresses (the primary one of each
 * family), where NodePorts answer, and how pod traffic is told from the rest.
 * @module
 */
import type { V1Node } from "@kubernetes/client-node";
import {
  describeLocalDetector,
  type LocalDetection,
  type LocalDetector,
  localDetector,
} from "./_common/local_detector.ts";
import { cidrFamily, ipFamily, isLoopback } from "./model/net.ts";
import type { FamilyView } from "./family_view.ts";
import { NodePortAddresses } from "./model/nodeport_addresses.ts";
import type { Clock } from "./runtime/clock.ts";
import type { Logger } from "./runtime/logger.ts";
import { type NodeTopology, ZONE_LABEL } from "./model/topology.ts";
import type { IPFamily } from "./model/types.ts";

/** Options of {@linkcode NodeManager}. */
export interface NodeManagerOptions {
  readonly family: IPFamily;
  readonly nodeName: string;
  readonly log: Logger;
  readonly clock: Clock;
  /**
   * How long the first sync waits, once the Node list is in, for the own Node (and, in NodeCIDR
   * mode, its pod CIDRs), as upstream's NodeManager: node IPs and local detection are then right
   * from the first rule. 0 (the default; the file source, whose files are the whole truth): no wait.
   */
  readonly nodeWaitMs?: number;
  /**
   * How traffic from pods is told from the rest (masquerade decisions): `--detect-local-mode` and
   * what it reads. Omitted by modes that need none.
   */
  readonly localDetection?: LocalDetection;
  /** This node's addresses (any family): the live proxy's interfaces, or `render`'s `--node-ip`. Default none. */
  readonly nodeIPs?: readonly string[];
  /**
   * `render` without `--node-ip`: the node's addresses are the Node object's InternalIP and
   * ExternalIP addresses (from the source), as the node itself would hold them.
   */
  readonly nodeIPsFromNode?: boolean;
  /**
   * `--nodeport-addresses` as configured (CIDRs of both families, or `primary`); default none: every
   * address of the node.
   */
  readonly nodePortAddresses?: readonly string[];
  /**
   * What has been said of the Node, shared by the managers of one node's families (dual-stack has
   * two, watching the same Node), so the wait, its end and the Node's late arrival are each said
   * once. Default: this manager's own.
   */
  readonly saidOfNode?: Set<string>;
  /** Called once when the wait is over (the Node is known, or the wait timed out). */
  readonly onReady: () => void;
  /**
   * Everything about the Node the rules depend on, as one string (default
   * {@linkcode NodeManager.dependentState}; a mode that reads more of the Node extends it).
   */
  readonly dependentState?: () => string;
}

/** The own Node and what the rules read of it; see the module doc. */
export class NodeManager {
  readonly #o: NodeManagerOptions;
  #node?: V1Node;
  #ready: boolean;
  /** The wait ended without the Node: its arrival is worth a line. */
  #missing = false;
  readonly #said: Set<string>;
  #stopWait = () => {};

  /** Holds no Node yet; starts no timer (that waits for {@linkcode synced}). */
  constructor(o: NodeManagerOptions) {
    this.#o = o;
    this.#ready = (o.nodeWaitMs ?? 0) <= 0;
    this.#said = o.saidOfNode ?? new Set();
  }

  /** The own Node, when known. */
  get node(): V1Node | undefined {
    return this.#node;
  }

  /** The Node list is in and the own Node is known (with its pod CIDRs when needed), or the wait is over. */
  get ready(): boolean {
    return this.#ready;
  }

  /**
   * Takes the Node as an event reports it (undefined: deleted). Returns "ready" when this ended the
   * first sync's wait for it ({@linkcode NodeManagerOptions.onReady} is then not called), "changed"
   * when what the rules depend on changed (every Service's rules may: a full sync), else "same".
   */
  set(n: V1Node | undefined): "ready" | "changed" | "same" {
    const state = () => this.#o.dependentState?.() ?? this.dependentState();
    const before = state();
    const zone = this.topology.zone;
    this.#node = n;
    if (!this.#ready && this.#complete()) {
      this.#stopWait();
      this.#ready = true;
      this.#say("info", "Node known", {});
      return "ready";
    }
    if (this.#missing && n !== undefined) {
      this.#missing = false;
      this.#say("info", "The Node object appeared; the rules now use its addresses and pod CIDRs", {});
    }
    if (state() === before) return "same";
    if (this.topology.zone !== zone) {
      this.#o.log.info("Node topology changed", { family: this.#o.family, zone: this.topology.zone });
    }
    return "changed";
  }

  /** The Node list is in: ready now if the Node is complete, else wait for it at most `waitMs`. */
  synced(): void {
    if (this.#ready) return;
    const waitMs = this.#o.nodeWaitMs ?? 0;
    if (this.#complete()) {
      this.#ready = true;
      this.#o.onReady();
      return;
    }
    this.#say("info", "Waiting for the Node object before the first sync", { timeoutMs: waitMs });
    this.#stopWait = this.#o.clock.setTimer(() => {
      if (this.#ready) return;
      this.#missing = this.#node === undefined;
      if (this.#missing) {
        // Upstream waits for the Node the same way; a name that matches none is the usual cause.
        this.#say(
          "warn",
          `No Node object "${this.#o.nodeName}" (--hostname-override, else this machine's hostname): ` +
            "syncing without its addresses and pod CIDRs, and taking them when it appears",
          { waitedMs: waitMs },
        );
      } else {
        this.#say(
          "warn",
          "The Node has no pod CIDRs yet (NodeCIDR mode); syncing without local traffic detection",
          { waitedMs: waitMs },
        );
      }
      this.#ready = true;
      this.#o.onReady();
    }, waitMs);
  }

  /** Logs `msg` unless a manager of this node (this one or another family's) already has. */
  #say(level: "info" | "warn", msg: string, fields: Record<string, unknown>): void {
    if (this.#said.has(msg)) return;
    this.#said.add(msg);
    this.#o.log[level](msg, { node: this.#o.nodeName, ...fields });
  }

  /** The own Node is known, with pod CIDRs when `--detect-local-mode=NodeCIDR` needs them. */
  #complete(): boolean {
    const n = this.#node;
    if (n === undefined) return false;
    if (this.#o.localDetection?.mode !== "NodeCIDR") return true;
    return (n.spec?.podCIDRs?.length ?? 0) > 0 || (n.spec?.podCIDR ?? "") !== "";
  }

  /** This node's name and zone, for endpoint selection (`proxier/model/topology.ts`). */
  get topology(): NodeTopology {
    return { nodeName: this.#o.nodeName, zone: this.#node?.metadata?.labels?.[ZONE_LABEL] ?? "" };
  }

  /** The Node's pod CIDRs of this family (`spec.podCIDRs`), as known now. */
  get podCIDRs(): readonly string[] {
    const n = this.#node?.spec;
    const all = n?.podCIDRs ?? (n?.podCIDR ? [n.podCIDR] : []);
    return all.filter((c) => cidrFamily(c) === this.#o.family);
  }

  /** How pod traffic is told from the rest for this family, or undefined when it cannot be. */
  get localDetector(): LocalDetector | undefined {
    return localDetector(this.#o.localDetection, this.#o.family, this.#node);
  }

  /**
   * This node's addresses (any family): the configured ones; with `nodeIPsFromNode`, the Node
   * object's InternalIP and ExternalIP addresses once it is known.
   */
  get ips(): readonly string[] {
    if (this.#o.nodeIPsFromNode !== true) return this.#o.nodeIPs ?? [];
    return (this.#node?.status?.addresses ?? [])
      .filter((a) =>
        (a.type === "InternalIP" || a.type === "ExternalIP") && ipFamily(a.address) !== undefined
      )
      .map((a) => a.address);
  }

  /** Says where {@linkcode ips} came from and what they are, for `render`'s note. */
  describeIPs(): string {
    const ips = this.ips.join(", ") || "none";
    const name = this.#o.nodeName;
    if (this.#o.nodeIPsFromNode !== true) return `${ips} (--node-ip)`;
    return this.#node === undefined
      ? `none (no Node object "${name}" in the source; --node-ip sets them)`
      : `${ips} (the Node object "${name}"'s InternalIP and ExternalIP)`;
  }

  /** The Node's primary address of this family (InternalIP, else ExternalIP), as upstream picks it. */
  get primaryIP(): string | undefined {
    const addrs = this.#node?.status?.addresses ?? [];
    for (const type of ["InternalIP", "ExternalIP"]) {
      const a = addrs.find((a) => a.type === type && ipFamily(a.address) === this.#o.family);
      if (a !== undefined) return a.address;
    }
    return undefined;
  }

  /**
   * Returns where NodePorts (and health check node ports) answer for this family
   * (`proxier/model/nodeport_addresses.ts`), `primary` resolved to the Node's primary address as
   * known now.
   * `allowIPv4Localhost`: the mode can serve NodePorts on 127.0.0.0/8.
   */
  nodePortAddresses(allowIPv4Localhost = false): NodePortAddresses {
    return new NodePortAddresses(
      this.#o.family,
      this.#o.nodePortAddresses ?? [],
      this.primaryIP,
      allowIPv4Localhost,
    );
  }

  /** The node facts `explain` reads beside the model (`family_view.ts`), as known now. */
  viewFacts(): Pick<
    FamilyView,
    "topology" | "nodeIPs" | "nodePortIPs" | "nodePortsOnEveryAddress" | "podCIDRs" | "localDetector"
  > {
    const npa = this.nodePortAddresses();
    return {
      topology: this.topology,
      nodeIPs: this.ips.filter((ip) => ipFamily(ip) === this.#o.family && !isLoopback(ip)),
      nodePortIPs: npa.nodeIPs(this.ips).filter((ip) => !isLoopback(ip)),
      nodePortsOnEveryAddress: npa.matchAll,
      podCIDRs: this.podCIDRs,
      localDetector: this.localDetector,
    };
  }

  /**
   * Everything about the own Node that every mode's rules depend on, as one string: a change
   * forces a full sync.
   */
  dependentState(): string {
    return JSON.stringify([
      this.topology.zone,
      describeLocalDetector(this.localDetector),
      this.primaryIP ?? "",
      this.#o.nodeIPsFromNode === true ? this.ips : [],
    ]);
  }
}
