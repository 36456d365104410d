import { assert, assertEquals } from "../tests/support/assert.ts";
import { ChainWatch } from "./chain_watch.ts";

const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

Deno.test("a chain watch removes its directory, with the shim and the restores it kept, on close", async () => {
  const watch = await ChainWatch.create("legacy", "kpd-chain-watch-test-");
  try {
    assert(watch.dir.includes("kpd-chain-watch-test-"), watch.dir);
    const env = await watch.env();
    assertEquals(env.PATH.split(":")[0], watch.dir);
    // What a committed restore leaves: its input, and the line noting it.
    await Deno.writeTextFile(`${watch.dir}/restore.kept`, "*nat\n:KUBE-SEP-X - [0:0]\nCOMMIT\n");
    await Deno.writeTextFile(`${watch.dir}/committed`, `${Date.now() * 1e6} ${watch.dir}/restore.kept\n`);
    assertEquals(typeof await watch.appeared("KUBE-SEP-X", 1_000), "number");
  } finally {
    await watch.close();
  }
  assertEquals(await exists(watch.dir), false);
  // A second close (a failure path closing what a finally closes again) is no error.
  await watch.close();
});
