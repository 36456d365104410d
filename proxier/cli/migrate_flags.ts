/**
 * `migrate`'s command line: the flags read into a {@linkcode MigrateQuery} (its `--help` is
 * `usage.ts`'s).
 * @module
 */
import type { MigrateQuery } from "../commands/migrate/migrate.ts";
import { UsageError } from "../errors.ts";
import { PROXY_MODES, type ProxyMode } from "../options/config.ts";
import { parseIPList } from "../options/values.ts";

/** Reads `migrate`'s flags. @throws {UsageError} naming what is wrong. */
export function parseMigrateQuery(given: (flag: string) => string | undefined): MigrateQuery {
  const mode = (flag: string): ProxyMode | undefined => {
    const v = given(flag);
    if (v === undefined) return undefined;
    if (!(PROXY_MODES as readonly string[]).includes(v)) {
      throw new UsageError(`--${flag}: invalid value ${JSON.stringify(v)} (${PROXY_MODES.join(", ")})`);
    }
    return v as ProxyMode;
  };
  const to = mode("to");
  if (to === undefined) throw new UsageError("migrate: needs --to=MODE, the mode to move to");
  const output = given("output") ?? "text";
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output: invalid value ${JSON.stringify(output)} (text or json)`);
  }
  const nodeIP = given("node-ip");
  return {
    to,
    from: mode("from-mode"),
    rulesFile: given("rules"),
    output,
    ...(nodeIP === undefined ? {} : { nodeIPs: parseIPList("--node-ip", nodeIP) }),
  };
}
