import { ExecError, type ExecOptions, type ExecResult, type Executor } from "../../iptables/executor.ts";
import { assertEquals } from "../../tests/support/assert.ts";
import { chooseIptablesBackend, onEveryIptablesBackend } from "./iptables_backend.ts";

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

Deno.test("iptables backend: auto follows kubelet's chains, then the rule count, else nft, naming no table", async () => {
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
    // Naming a table to the legacy backend creates it: the probe saves whole backends only.
    assertEquals(exec.ran.filter((c) => c.includes(" -t ")), [], name);
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
