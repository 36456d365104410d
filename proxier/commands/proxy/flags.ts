/**
 * The proxy's command flags, `--cleanup` and `--init-only` (upstream's, so their definitions are in
 * the flag table), read into a {@linkcode ProxyQuery}.
 * @module
 */
import type { CommandArgs } from "../../command_definition.ts";
import { parseBool } from "../../options/pflag.ts";

/** What the proxy is asked to do. */
export interface ProxyQuery {
  /** `--cleanup`: remove every mode's kernel objects and exit. */
  readonly cleanup: boolean;
  /** `--init-only`: the privileged set-up, then exit. */
  readonly initOnly: boolean;
}

/** Reads `--cleanup` and `--init-only`. @throws {UsageError} for a value that is not a boolean. */
export function parseProxyQuery({ given }: CommandArgs): ProxyQuery {
  const bool = (name: string) => {
    const s = given(name);
    return s !== undefined && parseBool(`--${name}`, s);
  };
  return { cleanup: bool("cleanup"), initOnly: bool("init-only") };
}
