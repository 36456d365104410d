/**
 * nft's text syntax as the nftables mode writes it and nft prints it: top-level splitting, a rule's
 * jump targets and set references, one element, and durations. Shared by the ruleset model, the
 * listing normalizer and the tracer.
 * @module
 */

/** Splits on `sep` outside braces and quotes (one pass; the parts are slices of `s`). */
export function splitTop(s: string, sep: string): string[] {
  const out: string[] = [];
  const sepCode = sep.charCodeAt(0);
  let depth = 0, quote = false, start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 34) quote = !quote; // "
    else if (!quote && c === 123) depth++; // {
    else if (!quote && c === 125) depth--; // }
    if (!quote && depth === 0 && c === sepCode) {
      out.push(s.slice(start, i));
      start = i + 1;
    }
  }
  out.push(s.slice(start));
  return out.map((x) => x.trim()).filter((x) => x !== "");
}

/** Returns the chains a rule or verdict text jumps or goes to. */
export function targets(text: string): string[] {
  return [...text.matchAll(/\b(?:jump|goto) ([A-Za-z0-9_./-]+)/g)].map((m) => m[1]);
}

/** Returns the sets and maps a rule refers to (`@name`). */
export function setRefs(text: string): string[] {
  return [...text.matchAll(/@([A-Za-z0-9_./-]+)/g)].map((m) => m[1]);
}

/** Parses `key [timeout T] [expires E] [comment "c"] [: value]`. */
export function parseElement(
  text: string,
): { key: string; value: string; comment?: string; expires?: number } {
  let rest = text;
  let value = "";
  const colon = rest.search(/ : /);
  if (colon >= 0) {
    value = rest.slice(colon + 3).trim();
    rest = rest.slice(0, colon);
  }
  let comment: string | undefined;
  const cm = / comment "([^"]*)"/.exec(rest);
  if (cm) {
    comment = cm[1];
    rest = rest.replace(cm[0], "");
  }
  const expires = / expires (\S+)/.exec(rest)?.[1];
  rest = rest.replace(/ (timeout|expires) \S+/g, "");
  return {
    key: rest.trim().replace(/\s+/g, " "),
    value,
    comment,
    ...(expires === undefined ? {} : { expires: parseSeconds(expires) }),
  };
}

/** Reads a duration as nft writes or prints it (`10800s`, `3h`, `1m40s`, `2d`, `9m58s340ms`) in seconds. */
export function parseSeconds(text: string): number {
  const unit: Record<string, number> = { d: 86400, h: 3600, m: 60, s: 1, ms: 0.001 };
  let total = 0;
  for (const [, n, u] of text.matchAll(/(\d+)(ms|[dhms])/g)) total += Number(n) * unit[u];
  return total;
}

/** Formats seconds as nft prints durations (`3h`, `1m40s`). */
export function formatSeconds(total: number): string {
  const d = Math.floor(total / 86400), h = Math.floor(total % 86400 / 3600);
  const m = Math.floor(total % 3600 / 60), s = total % 60;
  return `${d ? `${d}d` : ""}${h ? `${h}h` : ""}${m ? `${m}m` : ""}${s || total === 0 ? `${s}s` : ""}`;
}
