/**
 * The readiness condition of Service ports the userspace mode holds but cannot serve (a port
 * another program holds, `--proxy-port-range` exhausted): while any is, the proxy is not ready.
 * @module
 */

/** How many ports are named in the condition; the rest are counted. */
const NAMED = 3;

/** Returns the condition for `unopened` (service port -> why), undefined when every port is served. */
export function unservedCondition(
  unopened: ReadonlyMap<string, string>,
): { readonly message: string; readonly blocksReadiness: true } | undefined {
  if (unopened.size === 0) return undefined;
  const named = [...unopened].slice(0, NAMED).map(([port, why]) => `${port} (${why})`).join("; ");
  const more = unopened.size > NAMED ? `; and ${unopened.size - NAMED} more` : "";
  return {
    message: `${unopened.size} Service port${unopened.size === 1 ? "" : "s"} not served: ${named}${more}`,
    blocksReadiness: true,
  };
}
