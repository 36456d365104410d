/**
 * The registry of built modes: the one place that names them. `main.ts` looks the chosen mode up
 * here and never names one itself.
 * @module
 */
import { iptablesMode } from "./iptables/mode.ts";
import { ipvsMode } from "./ipvs/mode.ts";
import type { ProxyModeDefinition } from "./mode_definition.ts";
import { nftablesMode } from "./nftables/mode.ts";
import { userspaceMode } from "./userspace/mode.ts";

/** Every mode this build can run, by `--proxy-mode` name, in `--cleanup` order. */
export const MODES: ReadonlyMap<string, ProxyModeDefinition> = new Map(
  // ipvs before iptables: its jumps lead into chains whose names the iptables mode shares.
  [ipvsMode, iptablesMode, nftablesMode, userspaceMode].map((m) => [m.name, m]),
);
