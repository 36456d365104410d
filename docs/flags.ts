/**
 * `deno task docs`: writes the flag reference (`docs/flags.md`) from the flag table.
 * @module
 */
import { flagReference } from "../proxier/cli/usage.ts";

const file = new URL("./flags.md", import.meta.url);
await Deno.writeTextFile(file, flagReference());
console.log(`wrote ${file.pathname}`);
