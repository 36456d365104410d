/**
 * The VM harness (`run.sh`: a guest with its own kernel, IPVS, ipset and dummy interfaces, running
 * a command from the host's filesystem), and in it the guest-side ipvs tests
 * (tests/vm/guest/*.guest.ts, named so that `deno test` on the host does not pick them up): the real
 * IPVS kernel this machine's kernel lacks. The guest's deno test must pass.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { realKernel } from "../support/namespace.ts";
import { pace } from "../support/bounds.ts";

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

/** Seconds a guest run may take before its first scenario: boot, deno's start, the program's first start. */
const BOOT_S = 120;
/**
 * Seconds a scenario may take unless its run says otherwise: a busy host slows the emulated guest
 * four times over and more, so a scenario's bound is eight to ten times what it takes on an idle host.
 */
const PER_SCENARIO_S = 60;

/**
 * How many times the guest's cap stretches: the host's slowdown as measured just before the run. The
 * emulated guest's vCPUs share the host's cores with whatever keeps them busy, and it slows more than
 * the host does (slowdown 12 in the guest beside 4.4 on the host, as the suite measured it), so the
 * twofold the bounds above allow is spent on that difference, not on the host's own slowdown.
 */
function capStretch(): number {
  return Math.max(1, pace());
}

/**
 * Runs `deno test` on `files` (relative to the checkout) inside the VM; returns its exit code and
 * output. The run's cap follows its `scenarios` (tests and steps), each given `scenarioS` seconds (a
 * scenario that starts several programs and waits out a kernel timeout takes more than one that
 * sends a few packets), stretched by the host's measured slowdown ({@linkcode capStretch}); a run
 * that hits it says which scenario was running and for how long.
 */
export async function guestTest(
  files: string[],
  o: { mem?: number; scenarios: number; scenarioS?: number },
): Promise<{ code: number; output: string }> {
  const slow = capStretch();
  const cap = Math.round((BOOT_S + (o.scenarioS ?? PER_SCENARIO_S) * o.scenarios) * slow);
  const child = new Deno.Command(RUN, {
    args: [
      "--mem",
      String(o.mem ?? 1024),
      "--timeout",
      String(cap),
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
  }).spawn();
  const lines: string[] = [];
  let running: { name: string; since: number } | undefined;
  const read = async (stream: ReadableStream<Uint8Array>) => {
    let rest = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      rest += chunk;
      for (let nl; (nl = rest.indexOf("\n")) >= 0; rest = rest.slice(nl + 1)) {
        const line = rest.slice(0, nl);
        lines.push(line);
        // `name ...` starts a test or step; `name ... ok (1s)` ends it.
        if (/ \.\.\.$/.test(line)) running = { name: line.trim().slice(0, -4), since: performance.now() };
        else if (/ \.\.\. (ok|FAILED|ignored)/.test(line)) running = undefined;
      }
    }
    if (rest !== "") lines.push(rest);
  };
  await Promise.all([read(child.stdout), read(child.stderr)]);
  const { code } = await child.status;
  if (code === 125 && running !== undefined) {
    lines.push(
      `vm: the run hit its cap of ${cap} s (${o.scenarios} scenarios, stretched ${
        slow.toFixed(1)
      }x for the host's pace) while "${running.name}" had run ${
        Math.round((performance.now() - running.since) / 1000)
      } s`,
    );
  }
  return { code, output: lines.join("\n") };
}

Deno.test({
  name:
    `vm: ipvsadm, ipset and ip (kube-ipvs0) agree with their fakes on a real IPVS kernel; IPv6 through it${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/ipvs_tools.guest.ts", "tests/vm/guest/ipvs_ipv6.guest.ts"], {
      scenarios: 6,
    });
    assertEquals(r.code, 0, r.output);
    assertMatch(r.output, /ok \| 6 passed \| 0 failed/);
  },
});

Deno.test({
  name: `vm e2e ipvs: the real program sends real packets through a real IPVS kernel${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/e2e_ipvs.guest.ts"], { mem: 2048, scenarios: 19 });
    console.log(r.output.split("\n").filter((l) => /\.\.\. |^ok |^FAILED /.test(l)).join("\n"));
    assertEquals(r.code, 0, r.output);
  },
});

Deno.test({
  name:
    `vm explain truth ipvs: every client's answer on a live IPVS node matches a real connection from it${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/explain_truth_ipvs.guest.ts"], {
      mem: 2048,
      // One program start and about sixty real connections, a few waited out as dropped: ~15 s on the
      // host, minutes in the emulated guest beside a busy host.
      scenarios: 1,
      scenarioS: 600,
    });
    console.log(
      r.output.split("\n").filter((l) => /^explain truth |\.\.\. |^ok |^FAILED /.test(l)).join("\n"),
    );
    assertEquals(r.code, 0, r.output);
  },
});

Deno.test({
  name:
    `vm rollback ipvs: stopped, only upstream's names stay; upstream's nftables start leaves nothing of ipvs${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/rollback_ipvs.guest.ts"], {
      mem: 2048,
      // Three program starts and upstream's stand-in: ~40 s idle.
      scenarios: 1,
      scenarioS: 300,
    });
    assertEquals(r.code, 0, r.output);
    assertMatch(r.output, /ok \| 1 passed \| 0 failed/);
  },
});

Deno.test({
  name:
    `vm switch ipvs -> nftables: with the drain no established connection breaks; without it they do${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/switch_ipvs.guest.ts"], {
      mem: 2048,
      // Each: two program starts, and with the drain two migrate runs and a 20 s UDP timeout waited
      // out: 45-65 s idle, 3-5 min beside two busy loops per core (the drain's end varies most).
      scenarios: 2,
      scenarioS: 600,
    });
    console.log(r.output.split("\n").filter((l) => /^switch |\.\.\. |^ok |^FAILED /.test(l)).join("\n"));
    assertEquals(r.code, 0, r.output);
  },
});

Deno.test({
  name:
    `vm migrate proven by switching ipvs with iptables, nftables and userspace for real: 0 misses, 0 false changes${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/migrate_switch_ipvs.guest.ts"], {
      mem: 2048,
      // Six switches, each a program start, a live migrate and 42 connections made three times
      // before and after: about a minute each on the host's namespaces, several in the guest.
      scenarios: 6,
      scenarioS: 300,
    });
    console.log(
      r.output.split("\n").filter((l) => / -> .*real connections|\.\.\. |^ok |^FAILED /.test(l)).join("\n"),
    );
    assertEquals(r.code, 0, r.output);
  },
});

Deno.test({
  name: `vm chaos ipvs: the fault schedule's short seed loses no update on a real IPVS kernel${note}`,
  ignore,
  async fn() {
    const r = await guestTest(["tests/vm/guest/chaos_ipvs.guest.ts"], {
      mem: 2048,
      // 30 s of faults with a restart after each SIGKILL, then convergence: ~90 s idle.
      scenarios: 1,
      scenarioS: 720,
    });
    console.log(r.output.split("\n").filter((l) => /^\{|\.\.\. |^ok |^FAILED /.test(l)).join("\n"));
    assertEquals(r.code, 0, r.output);
  },
});

// The harness itself. Every guest run of the suite is in this one file, so no two guests ever run at
// once (deno test runs one file's tests in turn): each has the host's cores to itself.

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
    const r = await vm(["--timeout", "5", "--", "sleep", "600"]);
    assertEquals(r.code, 125);
    assertMatch(r.stderr, /vm: no result within 5s/);
    assert(Date.now() - started < 40_000);
  },
});
