/**
 * Golden files: a test's exact output kept in `tests/testdata/`. `UPDATE_GOLDEN=1 deno task test`
 * rewrites them from what the code produces now (then `git diff` shows what changed).
 * @module
 */
import { assertEquals } from "./assert.ts";

/**
 * Asserts that `actual` equals golden file `name` line by line (or, with `UPDATE_GOLDEN=1`, writes
 * it there first).
 */
export async function assertGolden(name: string, actual: string): Promise<void> {
  const file = new URL(`../testdata/${name}`, import.meta.url);
  if (Deno.env.get("UPDATE_GOLDEN") === "1") await Deno.writeTextFile(file, actual);
  assertEquals(actual.split("\n"), (await Deno.readTextFile(file)).split("\n"));
}
