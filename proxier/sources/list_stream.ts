/**
 * A list response parsed as it arrives, its items a batch at a time. `res.json()` holds the whole
 * body three times over at once: its bytes, their text and every object parsed from them (at
 * 50,000 EndpointSlices of 10 endpoints, about 50 MB of JSON as bytes and again as text, both
 * freed only by the next full collection). Here only an item not yet complete is held as bytes,
 * and each chunk's complete items are parsed and handed on while the rest is on its way.
 * @module
 */

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const SPACE = 0x20;

/** Where the scanner is in the list's top-level object. */
const enum Place {
  /** Before the items array: the bytes belong to the envelope (kind, apiVersion, metadata). */
  Envelope,
  /** Inside the items array, between items. */
  Between,
  /** Inside an item. */
  Item,
  /** After the items array: the envelope's again. */
  After,
}

/** The items key, as the envelope's text ends just before its array opens. */
const ITEMS_KEY = /(?<!\\)"items"\s*:\s*$/;

const EMPTY = new Uint8Array(0);
const decoder = new TextDecoder();

/**
 * Splits a list response's JSON into its items and its envelope (the list without them), fed in
 * chunks of any size. The syntax is checked by `JSON.parse` of each batch of items and of the
 * envelope: what does not parse throws a `SyntaxError`, as `res.json()` would.
 */
export class ListSplitter<T> {
  readonly #onItems: (items: T[]) => void;
  /** The envelope's bytes so far (small), the items array left out. */
  readonly #envelope: Uint8Array[] = [];
  /** The bytes of the item not complete yet, from its opening brace. */
  #carry: Uint8Array = EMPTY;
  #place = Place.Envelope;
  /** Nesting depth: of the envelope outside the items, of the current item inside them. */
  #depth = 0;
  #inString = false;
  #escaped = false;

  /** `onItems` receives each batch of parsed items, in order. */
  constructor(onItems: (items: T[]) => void) {
    this.#onItems = onItems;
  }

  /** Feeds the next chunk of the body; parses and hands on every item it completes. */
  push(chunk: Uint8Array): void {
    const bytes = this.#carry.length === 0 ? chunk : concat(this.#carry, chunk);
    let place = this.#place;
    let depth = this.#depth;
    let inString = this.#inString;
    let escaped = this.#escaped;
    // The complete items of this call are bytes [first, last); the envelope's run starts at `envelopeFrom`.
    let first = place === Place.Item ? 0 : -1;
    let last = -1;
    let envelopeFrom = place === Place.Envelope || place === Place.After ? 0 : -1;
    for (let i = this.#carry.length; i < bytes.length; i++) {
      const b = bytes[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (b === BACKSLASH) escaped = true;
        else if (b === QUOTE) inString = false;
        continue;
      }
      if (b === QUOTE) {
        if (place === Place.Between) throw new SyntaxError("a list's items must be objects, found a string");
        inString = true;
        continue;
      }
      const opens = b === OPEN_BRACE || b === OPEN_BRACKET;
      const closes = b === CLOSE_BRACE || b === CLOSE_BRACKET;
      if (place === Place.Item) {
        if (opens) depth++;
        else if (closes && --depth === 0) {
          place = Place.Between;
          last = i + 1;
        }
      } else if (place === Place.Between) {
        if (b === OPEN_BRACE) {
          place = Place.Item;
          depth = 1;
          if (first < 0) first = i;
        } else if (b === CLOSE_BRACKET) {
          place = Place.After;
          depth = 1;
          envelopeFrom = i + 1;
        } else if (b > SPACE && b !== COMMA) {
          throw new SyntaxError(
            `a list's items must be objects, found ${JSON.stringify(String.fromCharCode(b))}`,
          );
        }
      } else if (opens) {
        if (b === OPEN_BRACKET && depth === 1 && place === Place.Envelope) {
          this.#envelope.push(bytes.slice(envelopeFrom, i));
          envelopeFrom = i;
          if (ITEMS_KEY.test(this.#envelopeTail())) {
            // The items array stands in the envelope as an empty one.
            this.#envelope.push(new Uint8Array([OPEN_BRACKET, CLOSE_BRACKET]));
            place = Place.Between;
            envelopeFrom = -1;
            continue;
          }
        }
        depth++;
      } else if (closes) depth--;
    }
    this.#place = place;
    this.#depth = depth;
    this.#inString = inString;
    this.#escaped = escaped;
    if (envelopeFrom >= 0 && envelopeFrom < bytes.length) this.#envelope.push(bytes.slice(envelopeFrom));
    if (last > 0) this.#onItems(JSON.parse(`[${decoder.decode(bytes.subarray(first, last))}]`));
    // An item still open is carried from its opening brace: after the last complete one, or from
    // where it began in this call.
    const open = place !== Place.Item ? -1 : last > 0 ? bytes.indexOf(OPEN_BRACE, last) : first;
    this.#carry = open < 0 ? EMPTY : bytes.slice(open);
  }

  /**
   * Ends the body: returns the list without its items (`items` empty, or absent when the list had
   * none). @throws {SyntaxError} when the body ended inside the items or does not parse.
   */
  finish(): Record<string, unknown> {
    if (this.#place === Place.Item || this.#place === Place.Between) {
      throw new SyntaxError("the list ended inside its items");
    }
    const list = JSON.parse(decoder.decode(concat(...this.#envelope)));
    if (list === null || typeof list !== "object" || Array.isArray(list)) {
      throw new SyntaxError("a list must be a JSON object");
    }
    return list;
  }

  /** The envelope's last bytes as text (enough to see the key before an array). */
  #envelopeTail(): string {
    let tail = "";
    for (let i = this.#envelope.length - 1; i >= 0 && tail.length < 64; i--) {
      tail = decoder.decode(this.#envelope[i].subarray(-64)) + tail;
    }
    return tail;
  }
}

/** Returns the arrays' bytes one after another in one array. */
function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
