/**
 * Tokenizing of iptables rule text as iptables-restore reads it (double quotes group words).
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

/** Returns the value following `flag` in `args`, or undefined. */
export function argValue(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

/** Returns the jump target (`-j` or `-g`) of a rule, or undefined. */
export function jumpTarget(args: readonly string[]): string | undefined {
  return argValue(args, "-j") ?? argValue(args, "-g");
}
