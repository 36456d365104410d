/**
 * The exit codes have one definition (the command contract's `EXIT` and each command's `exits`):
 * `--help` prints each command's from it, and the README's table says the same, code by code.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { COMMANDS } from "../../proxier/commands.ts";
import { EXIT } from "../../proxier/command_definition.ts";
import { usageOf } from "../../proxier/cli/usage.ts";

const ROOT = new URL("../../", import.meta.url);

/** The README's exit-code table: code -> the cell of each column, by the column's heading. */
function readmeExitTable(text: string): Map<string, Map<number, string>> {
  const at = text.indexOf("Exit codes of `explain` and `migrate`:");
  assert(at >= 0, "the README has the exit-code table");
  const lines = text.slice(at).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith("|"));
  const cells = (l: string) => l.slice(1, -1).split("|").map((c) => c.trim());
  const [head, , ...body] = lines.slice(first, end < 0 ? undefined : end);
  const columns = cells(head).slice(1);
  const table = new Map(columns.map((c) => [c, new Map<number, string>()]));
  for (const row of body) {
    const [code, ...rest] = cells(row);
    rest.forEach((cell, i) => table.get(columns[i])!.set(Number(code), cell));
  }
  return table;
}

Deno.test("exit codes: the README's table is each command's definition, code by code", () => {
  const table = readmeExitTable(Deno.readTextFileSync(new URL("README.md", ROOT)));
  assertEquals([...table.keys()], ["explain", "migrate"]);
  for (const [name, codes] of table) {
    const command = [...COMMANDS.values()].find((c) => c.name === name)!;
    assertEquals([...codes], command.exits.map(([code, means]) => [code, means]), name);
  }
});

Deno.test("exit codes: each command's --help lists every code it can end in, from its definition", () => {
  for (const command of COMMANDS.values()) {
    const help = usageOf(command);
    assert(command.exits.length >= 3, `${command.name} says what ok, failed and bad input mean`);
    for (const [code, means] of command.exits) {
      assert(help.includes(`  ${code}  ${means}\n`), `${command.name} --help says ${code}: ${means}`);
    }
  }
  // The comparing commands say what "not checked" means.
  for (const name of ["explain", "migrate"]) {
    const command = [...COMMANDS.values()].find((c) => c.name === name)!;
    assert(command.exits.some(([code]) => code === EXIT.notChecked), `${name} lists exit 3`);
  }
});

Deno.test("exit codes: a README table that drifts from a definition is caught", () => {
  const table = readmeExitTable(
    "Exit codes of `explain` and `migrate`:\n\n| code | explain | migrate |\n| --- | --- | --- |\n" +
      "| 0 | fine | same |\n| 1 | differs | changes |\n\n| another | table |\n",
  );
  assertEquals([...table.get("explain")!], [[0, "fine"], [1, "differs"]]);
  assertEquals([...table.get("migrate")!], [[0, "same"], [1, "changes"]]);
});
