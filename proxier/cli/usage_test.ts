import { assert, assertEquals } from "../../tests/support/assert.ts";
import { FLAGS } from "../options/flag_table.ts";
import { flagReference, USAGE } from "./usage.ts";

Deno.test("docs/flags.md is what the flag table generates (run `deno task docs` after changing a flag)", () => {
  const file = Deno.readTextFileSync(new URL("../../docs/flags.md", import.meta.url));
  assertEquals(file.split("\n"), flagReference().split("\n"));
});

Deno.test("the flag reference and --help name every flag, upstream's and ours, and say what is not as upstream", () => {
  const ref = flagReference();
  const missing = FLAGS.filter((f) => f.origin !== "command" && !ref.includes(`\n| \`--${f.name}\``));
  assertEquals(missing.map((f) => f.name), []);
  assertEquals(
    FLAGS.filter((f) => f.origin !== "command" && !USAGE.includes(`--${f.name} `)).map((f) => f.name),
    [],
  );
  assert(
    ref.includes(
      "| `--boot-id-file` | string | `/proc/sys/kernel/random/boot_id` | accepted; named at start as not applying",
    ),
  );
  assert(ref.includes("| `--source` | string | `kubernetes` | ours |"));
});
