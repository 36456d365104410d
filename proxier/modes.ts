/**
 * The registry of built modes: the one place that names them. `main.ts` looks the chosen mode up
 * here and never names one itself. A definition loads its proxier and tracer only when a run asks
 * for them (`create`, `render`, `trace`): every start runs each mode's cleanup, but only one mode's
 * datapath, and the others' code would cost a running proxy resident memory for nothing.
 * @module
 */
import { iptablesMode } from "./iptables/mode.ts";
import { ipvsMode } from "./ipvs/mode.ts";
import type { ProxyModeDefinition } from "./mode_definition.ts";
import { nftablesMode } from "./nftables/mode.ts";
import { userspaceMode } from "./userspace/mode.ts";
import type { ProxyMode } from "./options/config.ts";

/** Each mode's definition, typed by the one mode list: a mode without one does not compile. */
const BY_NAME: Readonly<Record<ProxyMode, ProxyModeDefinition>> = {
  iptables: iptablesMode,
  ipvs: ipvsMode,
  nftables: nftablesMode,
  userspace: userspaceMode,
};

/** Every mode this build can run, by `--proxy-mode` name, in `--cleanup` order. */
export const MODES: ReadonlyMap<ProxyMode, ProxyModeDefinition> = new Map(
  // ipvs before iptables: its jumps lead into chains whose names the iptables mode shares.
  (["ipvs", "iptables", "nftables", "userspace"] as const).map((m) => [m, BY_NAME[m]]),
);
