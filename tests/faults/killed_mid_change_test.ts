/**
 * A program killed while nft holds a change's transaction, on a real kernel in a namespace this test
 * creates: the transaction's file stays in the temporary directory (nothing of the killed process
 * can remove it), and the next program started on the node removes it with its first transaction;
 * that program, stopped in order, leaves nothing there. The programs run as `deno task start` does,
 * with a temporary directory of the test's own (`TMPDIR`) and an nft on their PATH whose
 * interactive session stops answering at the transaction that names the changed NodePort.
 * @module
 */
import { assert, assertEquals } from "../support/assert.ts";
import { CONVERGE_MS } from "../support/bounds.ts";
import { eventually } from "../support/net_helpers.ts";
import { realKernel } from "../support/namespace.ts";
import { nodePortObjects } from "../support/node_port_objects.ts";
import type { ProxyProcess } from "../support/program.ts";
import { Topology } from "../e2e/netns.ts";

const { ignore, note } = await realKernel(["nft"]);

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string, prefix = ""): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${dir}/${prefix}`)) {
    const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
    if (e.isDirectory) out.push(...filesUnder(dir, rel));
    else out.push(rel);
  }
  return out.sort();
}

Deno.test({
  name: `faults: a program killed mid-change leaves its transaction file; the next start removes it${note}`,
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const t = new Topology();
    const dir = await Deno.makeTempDir({ prefix: "kpd-faults-killed-" });
    const tmp = `${dir}/tmp`, wrap = `${dir}/bin`;
    const procs: ProxyProcess[] = [];
    try {
      await t.init();
      await Deno.mkdir(tmp);
      await Deno.mkdir(wrap);
      const nft = (await new Deno.Command("sh", { args: ["-c", "command -v nft"] }).output()).stdout;
      // An nft whose session, given a transaction naming $STALL_ON, reads on and never answers.
      await Deno.writeTextFile(
        `${wrap}/nft`,
        `#!/bin/bash
if [ "$1" != "-i" ] || [ -z "$STALL_ON" ]; then exec ${new TextDecoder().decode(nft).trim()} "$@"; fi
while IFS= read -r line; do
  case "$line" in
    'include "'*) f=\${line#include \\"}; f=\${f%\\"}
      if grep -q -- "$STALL_ON" "$f"; then cat >/dev/null; exit 0; fi ;;
  esac
  printf '%s\\n' "$line"
done | ${new TextDecoder().decode(nft).trim()} "$@"
`,
      );
      await Deno.chmod(`${wrap}/nft`, 0o755);
      await Deno.writeTextFile(`${dir}/objects.yaml`, nodePortObjects("web", 30080));
      const start = (stallOn: string) => {
        const p = t.startProxy(
          [
            "--proxy-mode=nftables",
            `--source=file:${dir}/objects.yaml`,
            "--hostname-override=node-a",
            "--healthz-bind-address=127.0.0.1:10256",
            "--metrics-bind-address=127.0.0.1:10249",
          ],
          t.node,
          {
            PATH: `${wrap}:${Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin"}`,
            TMPDIR: tmp,
            STALL_ON: stallOn,
          },
        );
        procs.push(p);
        return p;
      };
      const nodePorts = async () =>
        await t.exec(t.node, ["nft", "list", "map", "ip", "kube-proxy", "service-ips"]);
      const first = start("30099");
      await eventually(async () => assert((await nodePorts()).includes("30080"), first.log()), CONVERGE_MS);
      // The change's transaction reaches the session, which holds it unanswered.
      await Deno.writeTextFile(`${dir}/objects.yaml`, nodePortObjects("web", 30099));
      let stalled: string[] = [];
      await eventually(() => {
        stalled = filesUnder(tmp).filter((f) => f.endsWith(".nft"));
        assert(
          stalled.some((f) => Deno.readTextFileSync(`${tmp}/${f}`).includes("30099")),
          `the change's transaction waits in ${tmp}: ${filesUnder(tmp)}`,
        );
      }, CONVERGE_MS);
      await first.stop("SIGKILL");
      assert(filesUnder(tmp).length > 0, "the killed program's transaction is still there");
      const second = start("");
      await eventually(async () => assert((await nodePorts()).includes("30099"), second.log()), CONVERGE_MS);
      // Its first transaction removed what the killed program left; its own directory is held.
      await eventually(() => {
        const left = filesUnder(tmp);
        assert(stalled.every((f) => !left.includes(f)), `still in ${tmp}: ${left}`);
      }, CONVERGE_MS);
      assertEquals((await second.stop("SIGTERM")).code, 0, second.log());
      assertEquals(
        filesUnder(tmp),
        [],
        "a program stopped in order leaves nothing in the temporary directory",
      );
    } finally {
      for (const p of procs) await p.stop("SIGKILL");
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
