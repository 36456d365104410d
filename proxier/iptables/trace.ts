/**
 * `trace --proxy-mode=iptables`: the iptables interpreter (`proxier/trace/iptables_walker.ts`) over the live rules of
 * this network namespace (read only) or over a `render` output or save file.
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import { IptablesRunner } from "../../iptables/iptables.ts";
import { parseRules, tracePacket } from "../trace/iptables_walker.ts";
import { lastParsed } from "../trace/parse_memo.ts";
import { ipFamily } from "../model/net.ts";
import { chooseIptablesBackend } from "../_common/iptables_backend.ts";
import {
  queryPacket,
  queryRules,
  type TraceQuery,
  type TracerConfig,
  type TraceResult,
} from "../trace/packet.ts";
import type { IPFamily } from "../model/types.ts";

/** Traces `q` through the iptables mode's rules; see the module doc. */
export async function traceIptables(
  q: TraceQuery,
  { exec, config, nodeIPs }: { exec: Executor; config: TracerConfig; nodeIPs: readonly string[] },
): Promise<TraceResult> {
  const family = ipFamily(q.dst) ?? "IPv4";
  let text = await queryRules(q);
  if (text !== undefined) {
    text = rulesOfFamily(text, family);
  } else {
    const { backend } = await chooseIptablesBackend(exec, config.iptablesBackend);
    const ipt = new IptablesRunner({ exec, family, backend });
    text = (await ipt.save("nat")) + (await ipt.save("filter"));
  }
  return tracePacket(parseRulesOnce(text), queryPacket(q, family, nodeIPs), nodeIPs);
}

/** The rules of a listing, parsed once for all the traces that read it. */
const parseRulesOnce = lastParsed(parseRules);

/** The part of a `render` output (both families, under headings) or a save file for `family`. */
function rulesOfFamily(text: string, family: IPFamily): string {
  const heading = "# ip6tables-restore --noflush input\n";
  const at = text.indexOf(heading);
  if (at < 0) return text;
  return family === "IPv4" ? text.slice(0, at) : text.slice(at + heading.length);
}
