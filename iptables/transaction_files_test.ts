import { assert, assertEquals, assertMatch } from "../tests/support/assert.ts";
import { sweepDeadOwners, TRANSACTION_DIR_PREFIX, TransactionFiles } from "./transaction_files.ts";

/** Runs `fn` over a root of its own, removed after. */
async function inRoot(fn: (root: string) => Promise<void> | void): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "kpd-txfiles-" });
  try {
    await fn(root);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

/** The transaction directories in `root`. */
function dirsIn(root: string): string[] {
  return [...Deno.readDirSync(root)].filter((e) => e.name.startsWith(TRANSACTION_DIR_PREFIX))
    .map((e) => `${root}/${e.name}`).sort();
}

Deno.test("TransactionFiles writes each transaction to a file of its own in a directory it owns, gone with its last user", async () => {
  await inRoot(async (root) => {
    const files = new TransactionFiles(root);
    assertEquals(files.dir, undefined);
    files.open();
    files.open();
    const a = files.write("add element ip t s { 1 }\n")!;
    const b = files.write("add element ip t s { 2 }\n")!;
    assertMatch(a, new RegExp(`^${root}/${TRANSACTION_DIR_PREFIX}\\w+/\\d+\\.nft$`));
    assert(a !== b);
    assertEquals(await Deno.readTextFile(b), "add element ip t s { 2 }\n");
    assertEquals(dirsIn(root), [files.dir!]);
    assert((await Deno.stat(`${files.dir}/owner`)).isFile);
    files.close();
    assertEquals(dirsIn(root).length, 1, "one user still holds it");
    files.close();
    assertEquals(dirsIn(root), []);
    assertEquals(files.dir, undefined);
  });
});

Deno.test("TransactionFiles answers undefined when the directory cannot be made, so the caller goes by nft -f", async () => {
  await inRoot((root) => {
    const files = new TransactionFiles(`${root}/missing`);
    files.open();
    assertEquals(files.write("add element ip t s { 1 }\n"), undefined);
    files.close();
  });
});

/** Starts a process holding a transaction directory in `root`; resolves with it and the directory once made. */
async function holder(root: string): Promise<{ child: Deno.ChildProcess; dir: string }> {
  const module = new URL("./transaction_files.ts", import.meta.url).href;
  const code = `import { TransactionFiles } from "${module}";
    const f = new TransactionFiles(${JSON.stringify(root)});
    f.open();
    f.write("add element ip t s { 1 }\\n");
    console.log(f.dir);
    await new Promise(() => setInterval(() => {}, 1000));`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "-q", code],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the holder ended before naming its directory: ${out}`);
    out += value;
  }
  reader.releaseLock();
  return { child, dir: out.trim() };
}

Deno.test("A transaction directory whose process was killed is removed by the next process's first write; a live one's is kept", async () => {
  await inRoot(async (root) => {
    const live = await holder(root);
    const dead = await holder(root);
    try {
      dead.child.kill("SIGKILL");
      await dead.child.status;
      // The killed process's transaction file is still there, its owner lock gone with it.
      assertEquals([...Deno.readDirSync(dead.dir)].map((e) => e.name).sort(), ["1.nft", "owner"]);
      const files = new TransactionFiles(root);
      files.open();
      assert(files.write("add element ip t s { 2 }\n") !== undefined);
      assertEquals(dirsIn(root), [files.dir!, live.dir].sort());
      files.close();
      assertEquals(dirsIn(root), [live.dir]);
    } finally {
      live.child.kill("SIGKILL");
      await live.child.status;
      await dead.child.stdout.cancel().catch(() => {});
      await live.child.stdout.cancel().catch(() => {});
    }
    assertEquals(sweepDeadOwners(root), [live.dir]);
    assertEquals(dirsIn(root), []);
  });
});

Deno.test("A transaction directory without its owner file is left for a minute, then removed", async () => {
  await inRoot(async (root) => {
    const young = `${root}/${TRANSACTION_DIR_PREFIX}young`;
    const old = `${root}/${TRANSACTION_DIR_PREFIX}old`;
    const other = `${root}/someone-else`;
    for (const d of [young, old, other]) await Deno.mkdir(d);
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    await Deno.utime(old, twoMinutesAgo, twoMinutesAgo);
    await Deno.utime(other, twoMinutesAgo, twoMinutesAgo);
    assertEquals(sweepDeadOwners(root), [old]);
    assertEquals(dirsIn(root), [young]);
    assert((await Deno.stat(other)).isDirectory, "what is not a transaction directory stays");
  });
});
