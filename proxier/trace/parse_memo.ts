/**
 * Parsing a listing once for many traces: `explain` traces every client of a Service through the
 * same rules (the text `render` wrote, or what one read of the live rules returned), and each mode's
 * tracer parses through {@linkcode lastParsed}, so only the first trace pays for the parse.
 * @module
 */

/**
 * Returns `parse` remembering its last answer: the same text again (most often the very same
 * string, compared at once) gets the same parse; other text replaces it.
 */
export function lastParsed<T>(parse: (text: string) => T): (text: string) => T {
  let last: { readonly text: string; readonly value: T } | undefined;
  return (text) => {
    if (last !== undefined && last.text === text) return last.value;
    const value = parse(text);
    last = { text, value };
    return value;
  };
}
