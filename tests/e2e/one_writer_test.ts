/**
 * One proxy per node, on a real kernel in namespaces this test creates: a second instance started
 * beside a running one (same mode or another) refuses with exit 2 naming it and writes nothing, so
 * nothing flaps; a rolling update (the old instance stopping while the new one starts) and
 * `--take-over` hand the node over; `--cleanup` beside a running proxy warns. Every program runs as
 * `deno task start` does.
 * @module
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually } from "../support/net_helpers.ts";
import { CONVERGE_MS } from "../support/bounds.ts";
import { realKernel } from "../support/namespace.ts";
import { nodePortObjects } from "../support/node_port_objects.ts";
import { Topology } from "./netns.ts";

const OBJECTS = nodePortObjects();

const kernel = await realKernel(["nft", "iptables-nft-save"]);

const test = (name: string, fn: (t: Topology, source: string) => Promise<void>) =>
  Deno.test({
    name: `e2e one writer per node: ${name}${kernel.note}`,
    ignore: kernel.ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const t = new Topology();
      const dir = await Deno.makeTempDir({ prefix: "kpd-e2e-writer-" });
      try {
        await t.init();
        await Deno.writeTextFile(`${dir}/objects.yaml`, OBJECTS);
        await fn(t, `--source=file:${dir}/objects.yaml`);
      } finally {
        await t.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });

/** Every rule of the node namespace, both tools, counters and comments with times left out. */
async function ruleset(t: Topology): Promise<string> {
  const nft = (await t.exec(t.node, ["nft", "list", "ruleset"], { allowFail: true }))
    .replace(/counter packets \d+ bytes \d+/g, "counter");
  const ipt = (await t.exec(t.node, ["iptables-nft-save"], { allowFail: true })).split("\n")
    .filter((l) => !l.startsWith("#")).map((l) => l.replace(/ \[\d+:\d+\]$/, "")).join("\n");
  return `${nft}\n${ipt}`;
}

const FLAGS = ["--hostname-override=node-a"];

for (const second of ["nftables", "iptables"] as const) {
  test(
    `a ${second}-mode start beside a running nftables one refuses (exit 2, naming it) and changes nothing`,
    async (t, source) => {
      const first = t.startProxy(["--proxy-mode=nftables", source, ...FLAGS]);
      await eventually(() => assertMatch(first.log(), /First sync in the kernel/), CONVERGE_MS);
      const before = await ruleset(t);
      const r = await t.runProgram([`--proxy-mode=${second}`, source, ...FLAGS]);
      assertEquals(r.code, 2, r.stderr);
      assertMatch(r.stderr, /"Another kube-proxy-deno keeps this node; nothing on it was changed"/);
      assertMatch(
        r.stderr,
        /other="kube-proxy-deno [^ ]+ \(nftables mode, pid \d+, instance [0-9a-f]{8}, node node-a/,
      );
      assertMatch(r.stderr, /waiting for it to stop/);
      assertEquals(await ruleset(t), before, "the second start wrote nothing");
      assert(!/Rules changed outside|Another writer/.test(first.log()), first.log());
      assertEquals(first.log().match(/First sync in the kernel/g)?.length, 1);
      // --cleanup beside it says the proxy will write its rules again.
      const cleanup = await t.runProgram(["--cleanup"]);
      assertMatch(
        cleanup.stderr,
        /"A kube-proxy-deno runs on this node: its next sync writes its rules again; stop it first" running="kube-proxy-deno .*nftables mode/,
      );
    },
  );
}

test(
  "a rolling update: the new instance waits while the old one stops, then takes the node",
  async (t, source) => {
    const old = t.startProxy(["--proxy-mode=nftables", source, ...FLAGS]);
    await eventually(() => assertMatch(old.log(), /First sync in the kernel/), CONVERGE_MS);
    // The old pod's SIGTERM and the new pod's start at the same moment.
    const stopping = old.stop("SIGTERM");
    const next = t.startProxy(["--proxy-mode=iptables", source, ...FLAGS]);
    assertEquals((await stopping).code, 0, old.log());
    await eventually(() => assertMatch(next.log(), /First sync in the kernel/), CONVERGE_MS);
    assert(!/keeps this node/.test(next.log()), next.log());
    // The new mode removed the old one's rules once its own were in.
    await eventually(async () => {
      const rules = await ruleset(t);
      assert(!rules.includes("table ip kube-proxy"), rules);
      assertMatch(rules, /KUBE-SERVICES/);
    }, CONVERGE_MS);
  },
);

test("--take-over asks the running instance to stop and takes its place", async (t, source) => {
  const old = t.startProxy(["--proxy-mode=nftables", source, ...FLAGS]);
  await eventually(() => assertMatch(old.log(), /First sync in the kernel/), CONVERGE_MS);
  const next = t.startProxy(["--proxy-mode=nftables", "--take-over", source, ...FLAGS]);
  assertEquals((await old.exited).code, 0, old.log());
  assertMatch(
    old.log(),
    /"Another kube-proxy-deno takes this node over; stopping" by="kube-proxy-deno .*nftables mode/,
  );
  await eventually(() => assertMatch(next.log(), /First sync in the kernel/), CONVERGE_MS);
  assertMatch(next.log(), /asking it to stop \(--take-over\)/);
});
