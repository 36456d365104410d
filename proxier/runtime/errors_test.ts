import { RestoreError } from "../../iptables/iptables.ts";
import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { UsageError, ValidationError, WatchError } from "./errors.ts";
import { parseCommandLine } from "../cli/command_line.ts";

Deno.test("errors keep the error that caused them", () => {
  const cause = new Error("root");
  for (
    const e of [
      new ValidationError("Service a/b", "spec", "bad", { cause }),
      new UsageError("--x: bad", { cause }),
      new WatchError("watch /x: HTTP 500", 500, { cause }),
      new RestoreError("iptables-restore exited 1", 1, "-A X", { cause }),
    ]
  ) {
    assertEquals(e.cause, cause, e.name);
  }
});

Deno.test("a --config file that cannot be read or parsed keeps the reason as the cause", () => {
  const unreadable = assertThrows(
    () =>
      parseCommandLine(["--config=/x.yaml"], () => {
        throw new Deno.errors.NotFound("no such file");
      }),
    UsageError,
  );
  assert(unreadable.cause instanceof Deno.errors.NotFound, String(unreadable.cause));
  const garbled = assertThrows(() => parseCommandLine(["--config=/x.yaml"], () => "a: [b"), UsageError);
  assert(garbled.cause instanceof Error && garbled.cause !== garbled, String(garbled.cause));
  const unknown = assertThrows(() => parseCommandLine(["--no-such-flag"]), UsageError);
  assert(unknown.message.includes("--no-such-flag"), unknown.message);
});
