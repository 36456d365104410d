/**
 * `deno run tests/durations.ts LOG`: where a `deno task test` run's time went, from its output.
 * Prints each part's test count and summed test time (unit: tests beside the code; e2e: the rest of
 * tests/, real kernel in namespaces; guest: tests/vm, the qemu guest) and the ten slowest tests.
 * Files run in parallel, so the sums add up to more than the wall clock; they are what a part costs.
 * @module
 */

/** One finished top-level test from a `deno test --parallel` log. */
export interface TestTime {
  readonly file: string;
  readonly name: string;
  readonly result: "ok" | "FAILED" | "ignored";
  readonly ms: number;
}

/** The parts of the suite a test's file belongs to. */
export type Part = "unit" | "e2e" | "guest";

const UNITS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, "µs": 0.001, ns: 0.000001 };

/** Milliseconds of a Deno duration (`765µs`, `11ms`, `32s`, `1m44s`); NaN for anything else. */
export function parseDuration(text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|µs|ns)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) return NaN;
  return parts.reduce((sum, p) => sum + Number(p[1]) * UNITS[p[2]], 0);
}

/** Every top-level test that finished in `log` (steps, which are indented, are part of their test). */
export function testTimes(log: string): TestTime[] {
  const out: TestTime[] = [];
  for (const line of log.split("\n")) {
    // A test that printed output has its result after "----- post-test output end -----".
    const m = /(?:^|-----)(\.\/\S+) => (.*) \.\.\. (ok|FAILED|ignored) \(([^)]+)\)$/.exec(line);
    if (m === null) continue;
    const ms = parseDuration(m[4]);
    if (Number.isNaN(ms)) continue;
    out.push({ file: m[1].slice(2), name: m[2], result: m[3] as TestTime["result"], ms });
  }
  return out;
}

/** The part a test file belongs to. */
export function partOf(file: string): Part {
  if (file.startsWith("tests/vm/")) return "guest";
  if (file.startsWith("tests/")) return "e2e";
  return "unit";
}

function clock(ms: number): string {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}

/** The report: one line per part, then the ten slowest tests. */
export function report(times: readonly TestTime[]): string {
  const lines = ["time per part (summed over its tests; files run in parallel):"];
  for (const part of ["unit", "e2e", "guest"] as const) {
    const mine = times.filter((t) => partOf(t.file) === part && t.result !== "ignored");
    const failed = mine.filter((t) => t.result === "FAILED").length;
    const sum = mine.reduce((s, t) => s + t.ms, 0);
    lines.push(
      `  ${part.padEnd(5)} ${String(mine.length).padStart(4)} tests, ${failed} failed, ${clock(sum)}`,
    );
  }
  lines.push("ten slowest tests:");
  for (const t of [...times].sort((a, b) => b.ms - a.ms).slice(0, 10)) {
    lines.push(`  ${clock(t.ms).padStart(6)}  ${t.file}: ${t.name.slice(0, 90)}`);
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const [path] = Deno.args;
  if (path === undefined) {
    console.error("usage: deno run --allow-read tests/durations.ts LOG");
    Deno.exit(2);
  }
  console.log(report(testTimes(await Deno.readTextFile(path))));
}
