import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { CommandFailure, EXIT } from "../command_definition.ts";
import { KubeconfigError } from "../runtime/errors.ts";
import { readSideApiAccess } from "./api_access.ts";

Deno.test("read side's API access: a kubeconfig it cannot use is bad input naming why the API was needed; other errors pass", async () => {
  const failure = await assertRejects(
    () =>
      readSideApiAccess(
        {
          apiAccess: () => Promise.reject(new KubeconfigError("kubeconfig: cannot read /absent: not found")),
        },
        "migrate reads the Services from the API",
      ),
    CommandFailure,
  );
  assertEquals([failure.code, failure.message], [
    EXIT.usage,
    "migrate reads the Services from the API: kubeconfig: cannot read /absent: not found",
  ]);
  await assertRejects(
    () => readSideApiAccess({ apiAccess: () => Promise.reject(new TypeError("bug")) }, "x"),
    TypeError,
  );
});
