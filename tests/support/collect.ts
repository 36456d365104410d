/**
 * A full garbage collection from a test, which runs without `--expose-gc`: tests that an object is
 * no longer held ask the collector, rather than trusting what the code seems to keep.
 * @module
 */
import v8 from "node:v8";
import vm from "node:vm";

let gc: (() => void) | undefined;

/** Runs a full, synchronous garbage collection; a `WeakRef` to anything unreachable is cleared after it. */
export function collectNow(): void {
  if (gc === undefined) {
    v8.setFlagsFromString("--expose-gc");
    gc = vm.runInNewContext("gc") as () => void;
  }
  gc();
}
