/**
 * Child of gc_test.ts: run with the start task's flags and permissions; prints whether a thorough
 * collection could return memory through malloc_trim.
 */
import { collectGarbage } from "../../proxier/runtime/gc.ts";

const trimmed = collectGarbage({ thorough: true });
console.log(JSON.stringify({ trimmed, gc: typeof (globalThis as { gc?: unknown }).gc }));
