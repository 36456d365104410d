import { assertEquals } from "../tests/support/assert.ts";
import { realKernel, withNamespace } from "../tests/support/namespace.ts";
import { ConntrackRunner, parseConntrackList } from "./conntrack.ts";
import type { Executor } from "./executor.ts";

const { ignore, note } = await realKernel(["conntrack"]);

Deno.test("parseConntrackList: the original tuple and the reply's source", () => {
  const text =
    "udp      17 59 src=10.0.0.1 dst=172.30.0.10 sport=40000 dport=53 [UNREPLIED] src=10.180.0.5 dst=10.0.0.1 sport=53 dport=40000 mark=0 use=1\n" +
    "udp      17 29 src=fd00::1 dst=fd00:30::10 sport=41000 dport=53 src=fd00:180::5 dst=fd00::1 sport=5353 dport=41000 [ASSURED] mark=0 use=1\n";
  assertEquals(parseConntrackList(text, "udp"), [
    {
      protocol: "udp",
      origSrc: "10.0.0.1",
      origDst: "172.30.0.10",
      origSport: 40000,
      origDport: 53,
      replySrc: "10.180.0.5",
      replySport: 53,
    },
    {
      protocol: "udp",
      origSrc: "fd00::1",
      origDst: "fd00:30::10",
      origSport: 41000,
      origDport: 53,
      replySrc: "fd00:180::5",
      replySport: 5353,
    },
  ]);
});

/**
 * Three flows in a namespace; the runner (its tool run through `wrap`) lists them and deletes one
 * batch, a flow gone among them.
 */
function listsAndDeletes(wrap: (exec: Executor) => Executor = (exec) => exec): () => Promise<void> {
  return async () => {
    await withNamespace(async (exec) => {
      for (
        const [sport, to] of [[40001, "10.180.0.5"], [40002, "10.180.0.5"], [40003, "10.180.0.6"]] as const
      ) {
        const r = await exec.run("conntrack", {
          args: [
            "-I",
            "-p",
            "udp",
            "-s",
            "10.0.0.1",
            "-d",
            "172.30.0.10",
            "--sport",
            String(sport),
            "--dport",
            "53",
            "-r",
            to,
            "-q",
            "10.0.0.1",
            "--reply-port-src",
            "53",
            "--reply-port-dst",
            String(sport),
            "-t",
            "60",
          ],
        });
        assertEquals(r.code, 0, r.stderr);
      }
      const ct = new ConntrackRunner({ exec: wrap(exec), family: "IPv4" });
      const listed = await ct.list("udp");
      assertEquals(listed.map((f) => `${f.origSport} ${f.replySrc}`).sort(), [
        "40001 10.180.0.5",
        "40002 10.180.0.5",
        "40003 10.180.0.6",
      ]);
      await ct.delete([
        { protocol: "udp", origDst: "172.30.0.10", origDport: 53, replySrc: "10.180.0.5", replySport: 53 },
        // Already gone (or never there): not an error.
        { protocol: "udp", origDst: "172.30.0.99", origDport: 53, replySrc: "10.180.0.5", replySport: 53 },
      ]);
      assertEquals((await ct.list("udp")).map((f) => `${f.origSport} ${f.replySrc}`), ["40003 10.180.0.6"]);
    });
  };
}

Deno.test({
  name: `ConntrackRunner lists and deletes real flows by tuple, in one batch${note}`,
  ignore,
  fn: listsAndDeletes(),
});

Deno.test({
  name: `ConntrackRunner deletes on a node whose /dev has no stdin link (a minimal init's)${note}`,
  ignore,
  // The tool in a mount namespace of its own whose /dev is empty.
  fn: listsAndDeletes((exec) => ({
    run: (cmd, o) =>
      exec.run("unshare", {
        ...o,
        args: ["-m", "sh", "-c", 'mount -t tmpfs none /dev && exec "$0" "$@"', cmd, ...o.args],
      }),
  })),
});
