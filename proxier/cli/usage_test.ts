import { assert, assertEquals } from "../../tests/support/assert.ts";
import { COMMAND_NAMES, COMMANDS } from "../commands.ts";
import { FLAGS } from "../options/flag_table.ts";
import { flagReference, USAGE, usageOf } from "./usage.ts";

const commandUsage = (name: typeof COMMAND_NAMES[number]) => usageOf(COMMANDS.get(name)!);

Deno.test("docs/flags.md is what the flag table generates (run `deno task docs` after changing a flag)", () => {
  const file = Deno.readTextFileSync(new URL("../../docs/flags.md", import.meta.url));
  assertEquals(file.split("\n"), flagReference().split("\n"));
});

Deno.test("the flag reference and --help name every flag, upstream's and ours, and say what is not as upstream", () => {
  const ref = flagReference();
  const missing = FLAGS.filter((f) => !ref.includes(`\n| \`--${f.name}\``));
  assertEquals(missing.map((f) => f.name), []);
  assertEquals(FLAGS.filter((f) => !USAGE.includes(`--${f.name} `)).map((f) => f.name), []);
  assert(
    ref.includes(
      "| `--boot-id-file` | string | `/proc/sys/kernel/random/boot_id` | accepted; named at start as not applying",
    ),
  );
  assert(ref.includes("| `--source` | string | `kubernetes` | ours |"));
});

Deno.test("each command's --help lists its own flags (and not the proxy's whole list); the general --help names every command", () => {
  const named = [...COMMANDS.values()].filter((c) => c.help !== undefined);
  assertEquals(named.map((c) => c.name), COMMAND_NAMES.slice(1), "every command but the proxy has help");
  for (const definition of named) {
    const command = definition.name;
    const text = usageOf(definition);
    assert(text.startsWith(`Usage: kube-proxy-deno ${command} `), text);
    assert(text.includes(`deno task start ${command} `), "the form from a checkout");
    const own = definition.flags;
    assert(own.length > 0);
    for (const f of own) assert(text.includes(`\n  --${f.name} `), `${command} --help lists --${f.name}`);
    assert(!text.includes("--conntrack-max-per-core"), `${command} --help is not the general one`);
    assert(flagReference().includes(`### \`${command}\``), `docs/flags.md has a section for ${command}`);
  }
  assert(commandUsage("trace").includes("\n  --sport N"), "trace --help names --sport");
  assert(commandUsage("trace").includes("\n  --in-interface NAME"), "trace --help names --in-interface");
  assert(commandUsage("trace").includes("\n  --proxy-mode "), "trace --help names --proxy-mode");
  assert(commandUsage("explain").includes("\n  --client-ip IP"), "explain --help names --client-ip");
  assert(commandUsage("migrate").includes("\n  --to MODE"), "migrate --help names --to");
  assert(
    USAGE.startsWith(`Usage: kube-proxy-deno [${COMMAND_NAMES.slice(1).join("|")}] [flags]`),
    USAGE.split("\n")[0],
  );
});

Deno.test("--help keeps its columns: help starts in one column, two spaces at least after the flag, below it when the flag is long; every default is said", () => {
  const lines = [USAGE, ...COMMAND_NAMES.slice(1).map(commandUsage)].join("\n").split("\n");
  for (const [i, l] of lines.entries()) {
    if (!/^ {2}-/.test(l)) continue;
    const flagEnd = l.indexOf(" ", l.indexOf("--") + 2);
    const column = l.length > 34 && l.slice(32, 34) === "  " && l[34] !== " " ? 34 : undefined;
    assert(column !== undefined || lines[i + 1].startsWith(" ".repeat(34)), `misaligned: ${l}`);
    assert(flagEnd < 34 || column === undefined, `misaligned: ${l}`);
  }
  assert(USAGE.includes("--cleanup                       remove every rule"), "a bool flag");
  assert(/--cleanup .*\(default false\)/.test(USAGE), "bool flags say their default");
});
