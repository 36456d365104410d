/**
 * End to end, real kernel: for every mode this kernel can run (`modes.ts`), one node namespace runs
 * the real program (started as `deno task start` starts it) on a file source holding every
 * applicable scenario's objects; pods on veth pairs, client hosts and a second node on the node's
 * external link. Then each scenario of `scenarios.ts` runs as a step. Everything lives in
 * namespaces this test creates and removes.
 */
import { E2E_MODES } from "./modes.ts";
import { e2eTest } from "./mode_test_body.ts";

for (const [mode, { args, tools, where }] of Object.entries(E2E_MODES)) {
  if (where === "host") await e2eTest(mode, [...args], [...tools]);
}
