/**
 * `explain`'s text report: the JSON report (`report.ts`) in lines of at most 80 columns, most
 * important first (what each client reaches, then why not the others, then the datapath's answer).
 * @module
 */
import type { ClientReport, ExplainReport, PortReport } from "../../read_side/report.ts";

/** Wraps `text` at 80 columns, continuation lines indented by `indent` plus two. */
function wrap(indent: string, text: string): string[] {
  const out: string[] = [];
  let line = indent;
  for (const word of text.split(" ")) {
    if (line.trim() !== "" && line.length + 1 + word.length > 80) {
      out.push(line);
      line = `${indent}  ${word}`;
    } else line = line.trim() === "" ? `${indent}${word}` : `${line} ${word}`;
  }
  out.push(line);
  return out;
}

const list = (eps: readonly string[]) => eps.join(", ");

function portLines(p: PortReport): string[] {
  const addr = [
    `cluster IP ${p.clusterIP}`,
    ...(p.nodePort === null ? [] : [`NodePort ${p.nodePort}`]),
    ...p.externalIPs.map((ip) => `external IP ${ip}`),
    ...p.loadBalancerIPs.map((ip) => `load balancer IP ${ip}`),
  ];
  const out = wrap(
    "",
    `port ${p.name === "" ? "" : `${p.name} `}${p.port}/${p.protocol} (${p.family}): ${addr.join(", ")}`,
  );
  const facts = [
    `externalTrafficPolicy ${p.externalTrafficPolicy}`,
    `internalTrafficPolicy ${p.internalTrafficPolicy}`,
    p.affinitySeconds === null ? "no session affinity" : `ClientIP affinity ${p.affinitySeconds} s`,
    ...(p.scheduler === null ? [] : [`scheduler ${p.scheduler}`]),
    ...(p.loadBalancerSourceRanges.length === 0
      ? []
      : [`source ranges ${p.loadBalancerSourceRanges.join(", ")}`]),
    ...(p.healthCheck === null ? [] : [
      `health check node port ${p.healthCheck.nodePort} answers ${p.healthCheck.status} ` +
      `(${p.healthCheck.localEndpoints} local endpoint${p.healthCheck.localEndpoints === 1 ? "" : "s"})`,
    ]),
  ];
  out.push(...wrap("  ", facts.join("; ")));
  for (const l of p.limits) out.push(...wrap("  ", `not honoured here: ${l}`));
  for (const c of p.claims) out.push(...wrap("  ", `ADDRESS CLAIM: ${c}`));
  if (p.endpoints.length === 0) out.push("  endpoints: none");
  else out.push("  endpoints:");
  for (const e of p.endpoints) {
    const state = e.ready
      ? "ready"
      : e.serving && e.terminating
      ? "terminating, serving"
      : e.terminating
      ? "terminating"
      : "not ready";
    const hints = [
      ...(e.zoneHints.length > 0 ? [`for zone ${e.zoneHints.join(", ")}`] : []),
      ...(e.nodeHints.length > 0 ? [`for node ${e.nodeHints.join(", ")}`] : []),
    ];
    out.push(
      `    ${e.endpoint}  ${[state, e.local ? "on this node" : "on another node", ...hints].join(", ")}`,
    );
  }
  for (const c of p.clients) out.push(...clientLines(c));
  for (const k of p.skipped) out.push(...wrap("  ", `${k.label} (${k.via}): not asked about here: ${k.why}`));
  return out;
}

function clientLines(c: ClientReport): string[] {
  const k = c.connection;
  const dst = k.dst.includes(":") ? `[${k.dst}]:${k.port}` : `${k.dst}:${k.port}`;
  const out = wrap("  ", `${c.label} (${k.src}) -> ${dst} (${c.via}):`);
  const e = c.expected;
  if (c.claimedBy !== undefined) {
    // Whatever the datapath does there, it is another Service's: never "agrees" for this one.
    out.push(...wrap("    ", `CLAIMED: ${c.claimedBy}`));
    if (e.verdict === "DNAT") {
      out.push(...wrap("    ", `(${e.endpoints.length === 0 ? "none" : list(e.endpoints)})`));
    }
    return out;
  }
  if (e.verdict === "DNAT") {
    out.push(...wrap("    ", `reaches ${list(e.endpoints)}`));
    if (e.masqueradeWhy !== undefined) out.push(...wrap("    ", e.masqueradeWhy));
  } else out.push(...wrap("    ", `${e.verdict === "none" ? "not proxied" : e.verdict}: ${e.why}`));
  for (const x of e.excluded) out.push(...wrap("    ", `not ${x.endpoint}: ${x.detail}`));
  if (c.datapath === null) {
    out.push("    datapath: not checked here (nothing to read it from)");
  } else if (c.agrees === true) {
    out.push(...wrap("    ", `datapath: agrees (${c.datapath.by})`));
    for (const p of c.datapath.picks ?? []) out.push(...wrap("      ", `this connection: ${p}`));
    const pin = c.datapath.pinned;
    if (pin !== undefined) {
      const left = pin.expiresSeconds === undefined ? "" : `, for ${Math.round(pin.expiresSeconds)} s more`;
      out.push(
        ...wrap("      ", `this client is pinned to ${pin.endpoint} by its ClientIP affinity entry${left}`),
      );
    }
    if (c.datapath.note !== undefined) out.push(...wrap("      ", c.datapath.note));
  } else if (c.agrees === false) {
    out.push(...wrap("    ", `DISAGREEMENT: ${c.disagreement}`));
  } else {
    out.push(...wrap("    ", `datapath: no answer (${c.datapath.note ?? c.datapath.verdict})`));
  }
  return out;
}

/** How many clients could not be checked, for the first and last lines; "" when none. */
function notCheckedText(r: ExplainReport): string {
  const n = r.notChecked;
  return n === 0 ? "" : `${n} client${n === 1 ? " was" : "s were"} not checked (each said below, with why)`;
}

/** The last line: how many clients the datapath was checked for and agrees on, and what was not checked. */
function summary(r: ExplainReport): string {
  const clients = r.ports.flatMap((p) => p.clients);
  const notChecked = r.notChecked === 0 ? "" : ` ${notCheckedText(r).replace("below", "above")}.`;
  const claimed = r.claimed === 0
    ? ""
    : ` ${r.claimed} client${r.claimed === 1 ? " reaches" : "s reach"} another Service that claims ` +
      "the same address and port (CLAIMED above).";
  if (r.disagreements > 0) {
    return `${r.disagreements} DISAGREEMENT${
      r.disagreements === 1 ? "" : "S"
    }: the datapath does not do what the proxy's view says (drift, a stale sync, or a bug).${claimed}${notChecked}`;
  }
  // A client another Service's claim takes is never counted as agreeing for this one.
  const own = clients.filter((c) => c.agrees === true && c.claimedBy === undefined).length;
  if (own === 0 && r.claimed > 0) return `No client reaches this Service's endpoints.${claimed}${notChecked}`;
  if (own === 0) return `No client could be checked against the datapath.${notChecked}`;
  return `The datapath agrees with the model for ${
    own === 1 ? "the one client" : `the ${own} clients`
  } checked.${claimed}${notChecked}`;
}

/** Returns the text report; see the module doc. */
export function formatExplain(r: ExplainReport): string {
  const out = [`Service ${r.service}: ${r.mode} mode, node ${r.node}, ${r.rules} rules`];
  if (r.changed !== null) {
    const lag = r.applied === null
      ? "not applied yet"
      : `applied ${r.applied} (${
        ((Date.parse(r.applied) - Date.parse(r.triggered ?? r.changed)) / 1000).toFixed(3)
      } s after ${r.triggered === null ? "the change" : "its trigger"})`;
    out.push(
      ...wrap(
        "  ",
        `last change seen ${r.changed}${r.triggered === null ? "" : ` (triggered ${r.triggered})`}, ${lag}`,
      ),
    );
  }
  // What could not be checked comes first: it is not agreement.
  if (r.notChecked > 0) out.push(...wrap("", `NOT CHECKED: ${notCheckedText(r)}.`));
  for (const p of r.ports) out.push("", ...portLines(p));
  out.push("", ...wrap("", summary(r)));
  return out.join("\n") + "\n";
}
