/**
 * Starts the guest-side ipvs tests (tests/vm/guest/*.guest.ts, named so that `deno test` on the
 * host does not pick them up) in the VM: the real IPVS kernel this machine's kernel lacks. The
 * guest's deno test must pass.
 */
import { assertEquals, assertMatch } from "../support/assert.ts";
import { realKernel } from "../support/namespace.ts";

const RUN = new URL("./run.sh", import.meta.url).pathname;
const ROOT = new URL("../..", import.meta.url).pathname;
const { ignore, note } = await realKernel([
  "qemu-system-x86_64",
  "busybox",
  "cpio",
  "depmod",
  "ipvsadm",
  "ipset",
]);

/** Runs `deno test` on `files` (relative to the checkout) inside the VM; returns its exit code and output. */
export async function guestTest(files: string[], mem = 1024): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command(RUN, {
    args: [
      "--mem",
      String(mem),
      "--",
      "env",
      "KPD_IN_VM=1",
      Deno.execPath(),
      "test",
      "-A",
      "--no-check",
      "--unstable-net",
      ...files,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, output: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

Deno.test({
  name:
    `vm: ipvsadm, ipset and ip (kube-ipvs0) agree with their fakes on a real IPVS kernel; IPv6 through it${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/ipvs_tools.guest.ts", "tests/vm/guest/ipvs_ipv6.guest.ts"]);
    assertEquals(r.code, 0, r.output);
    assertMatch(r.output, /ok \| 6 passed \| 0 failed/);
  },
});

Deno.test({
  name: `vm e2e ipvs: the real program sends real packets through a real IPVS kernel${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/e2e_ipvs.guest.ts"], 2048);
    console.log(r.output.split("\n").filter((l) => /\.\.\. |^ok |^FAILED /.test(l)).join("\n"));
    assertEquals(r.code, 0, r.output);
  },
});

Deno.test({
  name:
    `vm rollback ipvs: stopped, only upstream's names stay; upstream's nftables start leaves nothing of ipvs${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/rollback_ipvs.guest.ts"], 2048);
    assertEquals(r.code, 0, r.output);
    assertMatch(r.output, /ok \| 1 passed \| 0 failed/);
  },
});

Deno.test({
  name:
    `vm switch ipvs -> nftables: with the drain no established connection breaks; without it they do${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/switch_ipvs.guest.ts"], 2048);
    console.log(r.output.split("\n").filter((l) => /^switch |\.\.\. |^ok |^FAILED /.test(l)).join("\n"));
    assertEquals(r.code, 0, r.output);
  },
});

Deno.test({
  name: `vm chaos ipvs: the fault schedule's short seed loses no update on a real IPVS kernel${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/chaos_ipvs.guest.ts"], 2048);
    console.log(r.output.split("\n").filter((l) => /^\{|\.\.\. |^ok |^FAILED /.test(l)).join("\n"));
    assertEquals(r.code, 0, r.output);
  },
});
