/**
 * Rule text as iptables-restore reads it and iptables-save prints it.
 * @module
 */

/** Splits a rule line into arguments; `"a b"` is one argument. Throws on an unclosed quote. */
export function splitArgs(line: string): string[] {
  const out: string[] = [];
  let cur = "";
  let inQuote = false;
  let has = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inQuote) {
      if (c === "\\" && line[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (c === '"') inQuote = false;
      else cur += c;
    } else if (c === '"') {
      inQuote = true;
      has = true;
    } else if (c === " " || c === "\t") {
      if (has) out.push(cur);
      cur = "";
      has = false;
    } else {
      cur += c;
      has = true;
    }
  }
  if (inQuote) throw new Error(`unterminated quote in: ${line}`);
  if (has) out.push(cur);
  return out;
}

/**
 * Returns the lines of `text` that start with `prefix`, without splitting the rest: an
 * iptables-save of a large table is tens of MiB, and only a few of its lines are wanted.
 */
export function linesStartingWith(text: string, prefix: string): string[] {
  const out: string[] = [];
  let at = text.startsWith(prefix) ? 0 : text.indexOf(`\n${prefix}`);
  if (at > 0) at++;
  while (at >= 0) {
    const end = text.indexOf("\n", at);
    out.push(text.slice(at, end < 0 ? text.length : end));
    if (end < 0) break;
    at = text.indexOf(`\n${prefix}`, end);
    if (at >= 0) at++;
  }
  return out;
}
