/**
 * Giving memory back after a connection burst works under the shipped permission set (`deno task
 * start`'s flags): the V8 collection is exposed and glibc's malloc_trim may be opened.
 */
import { assertEquals } from "../support/assert.ts";
import { LIBC_PATHS } from "../../proxier/runtime/gc.ts";
import { startArgs } from "../support/program.ts";

Deno.test("thorough garbage collection runs malloc_trim under the shipped permissions", async () => {
  const args = startArgs();
  args[args.length - 1] = new URL("./gc_trim.child.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), { args, stderr: "inherit" }).output();
  assertEquals(out.code, 0);
  const hasGlibc = LIBC_PATHS.some((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });
  assertEquals(JSON.parse(new TextDecoder().decode(out.stdout)), { trimmed: hasGlibc, gc: "function" });
});

Deno.test("the proxy permission set allows FFI to exactly the libc paths gc.ts opens", () => {
  const config = JSON.parse(Deno.readTextFileSync(new URL("../../deno.json", import.meta.url)));
  assertEquals(config.permissions.proxy.ffi, [...LIBC_PATHS]);
});
