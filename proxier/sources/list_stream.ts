/**
 * A list response parsed as it arrives, its items a batch at a time. `res.json()` holds the whole
 * body three times over at once: its bytes, their text and every object parsed from them (at
 * 50,000 EndpointSlices of 10 endpoints, about 50 MB of JSON as bytes and again as text, both
 * freed only by the next full collection). Here the bytes held are one batch of complete items
 * ({@linkcode PARSE_BATCH_BYTES}) and the item not complete yet (copied once, however many chunks
 * it spans); each batch is parsed and handed on while the rest of the body is on its way. A body that
 * fits in one batch and in an item's limit is not scanned: its chunks are held and decoded as they
 * come, while the thread would wait for the rest, and parsed whole at its end, what one batch of it
 * would hold, without the thread's pass over every byte (the Services list at 50,000 Services, on the
 * main thread while the first sync waits for it: 9.7 MB parsed 43-45 ms after their last byte, against
 * 125-128 with its bytes joined and decoded then; the EndpointSlices of a first list are scanned on
 * a worker, in small batches, `list_on_worker.ts`).
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

/** The bytes {@linkcode bracketed} puts around and between a batch's runs of items. */
const OPENING = new Uint8Array([OPEN_BRACKET]);
const SEPARATOR = new Uint8Array([COMMA]);
const CLOSING = new Uint8Array([CLOSE_BRACKET]);

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

const decoder = new TextDecoder();

/**
 * The most one item, or the envelope, may take: the API server stores no object over 1.5 MiB by
 * default (etcd's request limit), so a larger one is a broken stream, not an object to hold.
 */
export const MAX_ITEM_BYTES = 16 * 2 ** 20;

/**
 * Complete items are parsed in batches of at least this many bytes (the last may be smaller). The
 * size is measured, not derived: fewer batches start sooner, smaller ones peak lower. At 50,000
 * Services of one endpoint (lists of 12.7 and 18.1 MB of JSON, one batch each) the first sync was in
 * after 2.27 s on average against 2.38 with batches of 8 MiB (8 starts each, the main thread's CPU
 * 1.58 s against 1.70; batches of 2 MiB were slower again). The peak RSS at 50,000 Services x 10
 * endpoints (49 MB of EndpointSlices, two batches) was 434 and 452 MiB in two runs against 418-447
 * with 8 MiB; at 5,000 x 50, 241-252 MiB against 220.
 */
export const PARSE_BATCH_BYTES = 32 * 2 ** 20;

/**
 * Splits a list response's JSON into its items and its envelope (the list without them), fed in
 * chunks of any size. The syntax is checked by `JSON.parse` of each batch of items and of the
 * envelope: what does not parse throws a `SyntaxError`, as `res.json()` would; so does an item or
 * an envelope over {@linkcode MAX_ITEM_BYTES}.
 */
export class ListSplitter<T> {
  readonly #onItems: (items: T[]) => void;
  readonly #batchLimit: number;
  /** The body's chunks while it may still be parsed whole; undefined once scanned. */
  #held: Uint8Array[] | undefined = [];
  #heldBytes = 0;
  /** The held chunks' text, decoded as each came (a character may span two chunks). */
  #heldText: string[] = [];
  readonly #heldDecoder = new TextDecoder();
  /** The most a body parsed whole may take: a batch, and no more than an item may (so none is over). */
  readonly #wholeLimit: number;
  /** The envelope's bytes so far, the items array left out. */
  readonly #envelope: Uint8Array[] = [];
  #envelopeBytes = 0;
  /** Complete items not parsed yet, each part items separated by commas. */
  #batch: Uint8Array[] = [];
  #batchBytes = 0;
  /** The earlier chunks' bytes of the item not complete yet, from its opening brace. */
  #open: Uint8Array[] = [];
  #openBytes = 0;
  #place = Place.Envelope;
  /** Nesting depth: of the envelope outside the items, of the current item inside them. */
  #depth = 0;
  #inString = false;
  #escaped = false;

  /** `onItems` receives each batch of parsed items, in order; `batchBytes`: see {@linkcode PARSE_BATCH_BYTES}. */
  constructor(onItems: (items: T[]) => void, batchBytes = PARSE_BATCH_BYTES) {
    this.#onItems = onItems;
    this.#batchLimit = batchBytes;
    this.#wholeLimit = Math.min(batchBytes, MAX_ITEM_BYTES);
  }

  /**
   * Feeds the next chunk of the body; parses and hands on the items it completes, a batch at a time.
   * Held as it is, unscanned, while the body may still be parsed whole ({@linkcode finish}): the
   * caller must not reuse it.
   */
  push(chunk: Uint8Array): void {
    const held = this.#held;
    if (held !== undefined) {
      this.#heldBytes += chunk.length;
      if (this.#heldBytes <= this.#wholeLimit) {
        held.push(chunk);
        this.#heldText.push(this.#heldDecoder.decode(chunk, { stream: true }));
        return;
      }
      this.#held = undefined;
      this.#heldText = [];
      for (const c of held) this.#scan(c);
    }
    this.#scan(chunk);
  }

  #scan(chunk: Uint8Array): void {
    let place = this.#place;
    let depth = this.#depth;
    let inString = this.#inString;
    let escaped = this.#escaped;
    // This chunk's complete items end at `last` and start at `first` (0 with an item carried over:
    // its earlier bytes are in #open); the envelope's run starts at `envelopeFrom`.
    let first = place === Place.Item ? 0 : -1;
    let last = -1;
    // Where the current item began, less the bytes it had before this chunk.
    let itemStart = -this.#openBytes;
    let envelopeFrom = place === Place.Envelope || place === Place.After ? 0 : -1;
    for (let i = 0; i < chunk.length; i++) {
      if (inString) {
        if (escaped) {
          escaped = false;
          continue;
        }
        // Most of a list's bytes are inside strings: a tight loop to the string's end.
        let b = chunk[i];
        while (b !== QUOTE && b !== BACKSLASH && ++i < chunk.length) b = chunk[i];
        if (i === chunk.length) break;
        if (b === BACKSLASH) escaped = true;
        else inString = false;
        continue;
      }
      const b = chunk[i];
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
          this.#bound(last - itemStart);
        }
      } else if (place === Place.Between) {
        if (b === OPEN_BRACE) {
          place = Place.Item;
          depth = 1;
          itemStart = i;
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
          this.#keepEnvelope(chunk.slice(envelopeFrom, i));
          envelopeFrom = i;
          if (ITEMS_KEY.test(this.#envelopeTail())) {
            // The items array stands in the envelope as an empty one.
            this.#keepEnvelope(new Uint8Array([OPEN_BRACKET, CLOSE_BRACKET]));
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
    if (envelopeFrom >= 0 && envelopeFrom < chunk.length) this.#keepEnvelope(chunk.slice(envelopeFrom));
    if (last > 0) {
      this.#batch.push(
        this.#open.length === 0 ? chunk.slice(first, last) : concat([...this.#open, chunk.subarray(0, last)]),
      );
      this.#batchBytes += this.#openBytes + last - first;
      this.#open = [];
      this.#openBytes = 0;
    }
    if (this.#batchBytes >= this.#batchLimit || (place === Place.After && this.#batch.length > 0)) {
      const batch = this.#batch;
      this.#batch = [];
      this.#batchBytes = 0;
      this.#onItems(JSON.parse(decoder.decode(bracketed(batch))));
    }
    if (place === Place.Item) {
      // The item still open, from its opening brace: after the last complete one, or from where it
      // began in this chunk (or before it).
      const open = last > 0 ? chunk.indexOf(OPEN_BRACE, last) : first;
      this.#open.push(chunk.slice(open));
      this.#openBytes += chunk.length - open;
      this.#bound(this.#openBytes);
    }
  }

  /** Throws when an item of `bytes` is over the limit. */
  #bound(bytes: number): void {
    if (bytes > MAX_ITEM_BYTES) throw new SyntaxError(`an item of the list is over ${MAX_ITEM_BYTES} bytes`);
  }

  /**
   * Ends the body: returns the list without its items (`items` empty, or absent when the list had
   * none). @throws {SyntaxError} when the body ended inside the items or does not parse.
   */
  finish(): Record<string, unknown> {
    const held = this.#held;
    if (held !== undefined) {
      this.#held = undefined;
      this.#heldText.push(this.#heldDecoder.decode());
      const list = wholeList(this.#heldText.join(""));
      this.#heldText = [];
      if (list !== undefined) {
        const items = list.items;
        if (Array.isArray(items)) {
          list.items = [];
          if (items.length > 0) this.#onItems(items as T[]);
        }
        return list;
      }
      // Not a list of objects: scanned, it fails as a body too large to hold whole fails.
      for (const c of held) this.#scan(c);
    }
    if (this.#place === Place.Item || this.#place === Place.Between) {
      throw new SyntaxError("the list ended inside its items");
    }
    const list = JSON.parse(decoder.decode(concat(this.#envelope)));
    if (list === null || typeof list !== "object" || Array.isArray(list)) {
      throw new SyntaxError("a list must be a JSON object");
    }
    return list;
  }

  #keepEnvelope(bytes: Uint8Array): void {
    this.#envelope.push(bytes);
    this.#envelopeBytes += bytes.length;
    if (this.#envelopeBytes > MAX_ITEM_BYTES) {
      throw new SyntaxError(`the list's fields besides its items are over ${MAX_ITEM_BYTES} bytes`);
    }
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

/**
 * Returns the list `text` holds, parsed whole; undefined when it does not parse, is no JSON
 * object, or holds items that are not all objects (the scan says which, as for any body).
 */
function wholeList(text: string): Record<string, unknown> | undefined {
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch (e) {
    if (e instanceof SyntaxError) return undefined;
    throw e;
  }
  if (list === null || typeof list !== "object" || Array.isArray(list)) return undefined;
  const items = (list as { items?: unknown }).items;
  if (Array.isArray(items) && !items.every((o) => o !== null && typeof o === "object" && !Array.isArray(o))) {
    return undefined;
  }
  return list as Record<string, unknown>;
}

/**
 * Returns the runs of complete items `runs` as the bytes of one JSON array (`[`, the runs joined by
 * commas, `]`), to be decoded once: decoding each run, joining the texts and bracketing them would
 * copy a batch's text three times (the last as the parse flattens the bracketed text).
 */
function bracketed(runs: readonly Uint8Array[]): Uint8Array {
  const parts: Uint8Array[] = [OPENING];
  for (const r of runs) {
    if (parts.length > 1) parts.push(SEPARATOR);
    parts.push(r);
  }
  parts.push(CLOSING);
  return concat(parts);
}

/**
 * Returns the arrays' bytes one after another in one array. An array of them, not arguments: an
 * item may span more chunks than a call takes arguments.
 */
function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
