/**
 * Writing a command's output: whole, synchronously, before the program exits.
 * @module
 */

const encoder = new TextEncoder();

/** Writes all of `text` to `stream` (a short write is continued until everything is out). */
export function writeText(stream: { writeSync(p: Uint8Array): number }, text: string): void {
  const data = encoder.encode(text);
  let off = 0;
  while (off < data.length) off += stream.writeSync(data.subarray(off));
}
