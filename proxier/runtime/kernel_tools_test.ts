import { ExecError, type ExecOptions, type ExecResult, type Executor } from "../../iptables/executor.ts";
import { assert, assertEquals } from "../../tests/support/assert.ts";
import { MemoryLogger } from "../../tests/support/fixtures.ts";
import { iptablesMode } from "../iptables/mode.ts";
import {
  checkTools,
  chooseIptablesBackend,
  CONNTRACK_NEED,
  onEveryIptablesBackend,
  onPath,
} from "./kernel_tools.ts";
import { defaultConfig } from "../options/kube_proxy_configuration.ts";

/** Answers `*-save` from canned tables per command; commands not listed are not installed. */
class SaveOnly implements Executor {
  readonly ran: string[] = [];
  constructor(readonly tables: Record<string, { mangle?: string; all?: string }>) {}
  run(cmd: string, opts: ExecOptions): Promise<ExecResult> {
    this.ran.push([cmd, ...opts.args].join(" "));
    const base = cmd.replace(/-save$/, "");
    const t = this.tables[base];
    if (t === undefined) return Promise.reject(new ExecError(`${cmd}: cannot start`, -1));
    const stdout = opts.args.includes("mangle") ? t.mangle ?? "" : t.all ?? t.mangle ?? "";
    return Promise.resolve({ code: 0, stdout, stderr: "" });
  }
}

const hint = "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n";
const rules = (n: number) =>
  `*filter\n${
    Array.from({ length: n }, (_, i) => `-A INPUT -p tcp --dport ${i} -j ACCEPT`).join("\n")
  }\nCOMMIT\n`;

Deno.test("iptables backend: auto follows kubelet's chains, then the rule count, else nft", async () => {
  const cases: Array<[string, SaveOnly, string | undefined]> = [
    [
      "kubelet in nft",
      new SaveOnly({ "iptables-nft": { mangle: hint }, "iptables-legacy": { all: rules(50) } }),
      "nft",
    ],
    [
      "kubelet in legacy (IPv6 only)",
      new SaveOnly({
        "iptables-nft": { all: rules(50) },
        "iptables-legacy": {},
        "ip6tables-legacy": { mangle: hint },
      }),
      "legacy",
    ],
    [
      "more legacy rules",
      new SaveOnly({ "iptables-nft": { all: rules(3) }, "iptables-legacy": { all: rules(4) } }),
      "legacy",
    ],
    [
      "as many rules",
      new SaveOnly({ "iptables-nft": { all: rules(4) }, "iptables-legacy": { all: rules(4) } }),
      "nft",
    ],
    ["empty host", new SaveOnly({ "iptables-nft": {}, "iptables-legacy": {} }), "nft"],
    ["only legacy installed", new SaveOnly({ "iptables-legacy": {} }), "legacy"],
    ["neither installed", new SaveOnly({}), undefined],
  ];
  for (const [name, exec, want] of cases) {
    const got = await chooseIptablesBackend(exec, "auto");
    assertEquals(got.backend, want, `${name}: ${got.reason}`);
  }
});

Deno.test("iptables backend: a forced backend is used without looking", async () => {
  const exec = new SaveOnly({ "iptables-nft": { mangle: hint } });
  assertEquals((await chooseIptablesBackend(exec, "legacy")).backend, "legacy");
  assertEquals(exec.ran, []);
});

Deno.test("cleanup runs on every installed backend, and on plain iptables when neither is", async () => {
  const saved = async (exec: SaveOnly) => {
    await onEveryIptablesBackend(exec, "IPv6", (ipt) => ipt.save("nat").then(() => {}));
    return exec.ran.map((c) => c.split(" ")[0]);
  };
  assertEquals(
    await saved(new SaveOnly({ "ip6tables-nft": {}, "ip6tables-legacy": {}, "ip6tables": {} })),
    ["ip6tables-nft-save", "ip6tables-legacy-save"],
  );
  assertEquals(
    await saved(new SaveOnly({ "ip6tables": {} })),
    ["ip6tables-nft-save", "ip6tables-legacy-save", "ip6tables-save"],
  );
});

Deno.test("checkTools: each missing tool once; optional ones logged with what stops working", async () => {
  const log = new MemoryLogger();
  const installed = new Set(["iptables-save", "iptables-restore"]);
  const config = { ...defaultConfig(), localhostNodePorts: true };
  const missing = await checkTools(
    [...iptablesMode.tools, CONNTRACK_NEED],
    config,
    (t) => Promise.resolve(installed.has(t)),
    log,
  );
  assertEquals(missing.map((m) => m.tool), ["conntrack", "nfacct", "sysctl"]);
  assertEquals(log.messages("warn").length, 3);
  assert(
    log.messages("warn")[1].startsWith(
      "nfacct is not installed: kubeproxy_iptables_ct_state_invalid_dropped",
    ),
  );
  assert(
    log.messages("warn")[0].startsWith(
      "conntrack is not installed: stale UDP conntrack entries are not cleared",
    ),
  );
  // Without localhost NodePorts sysctl is not needed; without iptables the mode cannot run.
  installed.delete("iptables-restore");
  const again = await checkTools(
    iptablesMode.tools,
    { ...config, localhostNodePorts: false },
    (t) => Promise.resolve(installed.has(t)),
    new MemoryLogger(),
  );
  assertEquals(again.map((m) => [m.tool, m.required]), [
    ["iptables-restore", true],
    ["conntrack", false],
    ["nfacct", false],
  ]);
});

Deno.test("onPath finds executables in PATH's directories only", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/tool`, "#!/bin/sh\n", { mode: 0o755 });
    await Deno.writeTextFile(`${dir}/data`, "", { mode: 0o644 });
    assertEquals(await onPath("tool", `/nonexistent:${dir}`), true);
    assertEquals(await onPath("data", dir), false);
    assertEquals(await onPath("tool", "/nonexistent"), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
