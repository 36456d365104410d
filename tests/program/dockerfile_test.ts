/**
 * The shipped image (Dockerfile) carries every kernel tool each mode runs: a tool missing from the
 * image makes a mode exit at start in every cluster that uses the image.
 */
import { assertEquals } from "../support/assert.ts";
import { MODES } from "../../proxier/modes.ts";
import { PROCESS_TOOLS } from "../../proxier/commands/proxy/process_tools.ts";

/** The packages the Dockerfile's last stage installs with apt-get. */
function imagePackages(): Set<string> {
  const text = Deno.readTextFileSync(new URL("../../Dockerfile", import.meta.url));
  const last = text.slice(text.lastIndexOf("\nFROM "));
  const install = /apt-get install[^\n]*?((?:[^\n]*\\\n)*[^\n]*)/.exec(last)?.[0] ?? "";
  return new Set(install.replace(/\\\n/g, " ").split(/\s+/).filter((w) => /^[a-z0-9][a-z0-9.+-]+$/.test(w)));
}

Deno.test("the image installs the package of every tool every mode runs", () => {
  const have = imagePackages();
  const missing: string[] = [];
  for (
    const [mode, tools] of [
      ...[...MODES].map(([m, d]) => [m, d.tools] as const),
      ["every mode", PROCESS_TOOLS] as const,
    ]
  ) {
    for (const need of tools) {
      const pkg = /package (\S+?)\)?$/.exec(need.without)?.[1];
      if (pkg === undefined) missing.push(`${mode}: ${need.tool} names no package`);
      else if (!have.has(pkg)) missing.push(`${mode}: ${need.tool} (package ${pkg})`);
    }
  }
  assertEquals(missing, []);
});

/** nftables in each Debian release an image may be built on. */
const NFT_BY_RELEASE: Readonly<Record<string, readonly [number, number, number]>> = {
  bookworm: [1, 0, 6],
  trixie: [1, 1, 3],
};

Deno.test("the image's nft programs IPv6 ClientIP affinity (1.1.3 or newer; 1.0.6 aborts on its update rule)", () => {
  const text = Deno.readTextFileSync(new URL("../../Dockerfile", import.meta.url));
  const release = /\nFROM debian:([a-z]+)-slim\n(?![\s\S]*\nFROM )/.exec(text)?.[1];
  const nft = release === undefined ? undefined : NFT_BY_RELEASE[release];
  assertEquals(
    nft !== undefined && (nft[0] > 1 || (nft[0] === 1 && (nft[1] > 1 || (nft[1] === 1 && nft[2] >= 3)))),
    true,
    `the image is Debian ${release}, nft ${nft?.join(".")}`,
  );
});
