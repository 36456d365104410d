import { assertEquals } from "../../tests/support/assert.ts";
import { FakeClock } from "../runtime/clock.ts";
import { CONFIG_SETTLE_MS, watchConfigFile } from "./config_watch.ts";

/** Waits for the file watcher to deliver what happened (real file system, fake settle timer). */
const delivered = () => new Promise((r) => setTimeout(r, 200));

Deno.test("config watch: the same bytes, or a file gone for a moment, change nothing; new content calls once and ends", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  try {
    const path = `${dir}/config.conf`;
    await Deno.writeTextFile(path, "mode: iptables\n");
    const clock = new FakeClock();
    let changes = 0;
    const watching = watchConfigFile({
      path,
      text: "mode: iptables\n",
      signal: ac.signal,
      clock,
      onChange: () => changes++,
    });
    await delivered();
    await Deno.writeTextFile(path, "mode: iptables\n");
    await delivered();
    await clock.advance(CONFIG_SETTLE_MS);
    await Deno.remove(path);
    await delivered();
    await clock.advance(CONFIG_SETTLE_MS);
    assertEquals(changes, 0);
    await Deno.writeTextFile(path, "mode: nftables\n");
    await delivered();
    await clock.advance(CONFIG_SETTLE_MS - 1);
    assertEquals(changes, 0, "not before the directory was quiet");
    await clock.advance(1);
    await delivered();
    await watching; // it ended by itself
    assertEquals(changes, 1);
  } finally {
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("config watch: a file changed between the configuration's read and the watch's start ends the watch at once", async () => {
  const dir = await Deno.makeTempDir();
  const ac = new AbortController();
  // Bounds a watch that would wait for an event that never comes.
  const cap = setTimeout(() => ac.abort(), 10_000);
  try {
    const path = `${dir}/config.conf`;
    await Deno.writeTextFile(path, "mode: nftables\n");
    let changes = 0;
    await watchConfigFile({ path, text: "mode: iptables\n", signal: ac.signal, onChange: () => changes++ });
    assertEquals([changes, ac.signal.aborted], [1, false]);
  } finally {
    clearTimeout(cap);
    ac.abort();
    await Deno.remove(dir, { recursive: true });
  }
});
