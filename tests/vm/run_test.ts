/**
 * The VM harness (`tests/vm/run.sh`): a guest with its own kernel (IPVS, ipset, dummy interfaces)
 * runs a command from the host's filesystem, streams its output and returns its exit code.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { realKernel } from "../support/namespace.ts";

const RUN = new URL("./run.sh", import.meta.url).pathname;
const { ignore, note } = await realKernel(["qemu-system-x86_64", "busybox", "cpio", "depmod", "ipvsadm"]);

async function vm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(RUN, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test({
  name: `vm: the guest runs a host command with its output and exit code, on a kernel with IPVS${note}`,
  ignore,
  async fn() {
    const r = await vm(["--", "sh", "-c", "echo out; echo err >&2; pwd; exit 7"]);
    assertEquals([r.code, r.stdout, r.stderr], [7, `out\n${Deno.cwd()}\n`, "err\n"]);
    const ipvs = await vm([
      "--",
      "sh",
      "-c",
      "ipvsadm -A -t 10.0.0.1:80 -s rr && ipvsadm -S -n && ip link add kube-ipvs0 type dummy && " +
      "ipset create KUBE-CLUSTER-IP hash:ip,port && ipset list -n && deno eval 'console.log(Deno.version.deno)'",
    ]);
    assertEquals(ipvs.code, 0, ipvs.stderr);
    assertEquals(ipvs.stdout, `-A -t 10.0.0.1:80 -s rr\nKUBE-CLUSTER-IP\n${Deno.version.deno}\n`);
  },
});

Deno.test({
  name: `vm: a command that outlives the timeout ends with a message and exit 125${note}`,
  ignore,
  async fn() {
    const started = Date.now();
    const r = await vm(["--timeout", "15", "--", "sleep", "600"]);
    assertEquals(r.code, 125);
    assertMatch(r.stderr, /vm: no result within 15s/);
    assert(Date.now() - started < 40_000);
  },
});
