/**
 * The proxy's command flags, `--cleanup` and `--init-only` (upstream's) and `--take-over` (ours),
 * read into a {@linkcode ProxyQuery}; their definitions are in the flag table, beside every proxy flag.
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
  /** `--take-over`: ask another instance on this node to stop instead of waiting for it. */
  readonly takeOver: boolean;
}

/** Reads `--cleanup`, `--init-only` and `--take-over`. @throws {UsageError} for a value that is not a boolean. */
export function parseProxyQuery({ given }: CommandArgs): ProxyQuery {
  const bool = (name: string) => {
    const s = given(name);
    return s !== undefined && parseBool(`--${name}`, s);
  };
  return { cleanup: bool("cleanup"), initOnly: bool("init-only"), takeOver: bool("take-over") };
}
