/**
 * The client side of RFC 6455 framing over one connection, as small as exec needs: the upgrade's
 * accept key, masked control frames, and a bounded reader for the HTTP head and whole messages.
 * @module
 */
import { writeAll } from "../../../runtime/write_all.ts";

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const MAX_HEAD = 64 * 1024;
const MAX_REFUSAL_BODY = 64 * 1024;
const READ_CHUNK = 16 * 1024;

/** The `Sec-WebSocket-Accept` a server must answer to `key` (RFC 6455 section 4.2.2). */
export async function acceptFor(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(key + WS_GUID));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

/** A close frame (code 1000), masked as every client frame must be. */
export async function sendClose(conn: Deno.Conn): Promise<void> {
  try {
    await writeAll(conn, clientFrame(0x8, new Uint8Array([0x03, 0xe8])));
  } catch { /* the server may have closed first */ }
}

/** One client frame: FIN, `opcode`, masked `payload` (control frames here: under 126 bytes). */
function clientFrame(opcode: number, payload: Uint8Array): Uint8Array {
  const mask = crypto.getRandomValues(new Uint8Array(4));
  const frame = new Uint8Array(6 + payload.length);
  frame[0] = 0x80 | opcode;
  frame[1] = 0x80 | payload.length;
  frame.set(mask, 2);
  for (let i = 0; i < payload.length; i++) frame[6 + i] = payload[i] ^ mask[i % 4];
  return frame;
}

/**
 * Buffered reads of one connection: the HTTP head, a refusal's body, then WebSocket messages; every
 * read is bounded (head 64 KiB, refusal body 64 KiB, a message by its caller's `max`).
 */
export class WsReader {
  #store = new Uint8Array(READ_CHUNK * 2);
  #start = 0;
  #end = 0;
  readonly #conn: Deno.Conn;

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  get #buf(): Uint8Array {
    return this.#store.subarray(this.#start, this.#end);
  }

  /**
   * Reads until at least `n` bytes are buffered; false when the connection ends first. The store
   * grows by doubling and is compacted only when its tail is full: each byte is copied a bounded
   * number of times, whatever the output's size.
   */
  async #fill(n: number): Promise<boolean> {
    while (this.#end - this.#start < n) {
      if (this.#store.length - this.#end < READ_CHUNK) {
        const len = this.#end - this.#start;
        const need = Math.max(n, len + READ_CHUNK);
        if (need * 2 <= this.#store.length) this.#store.copyWithin(0, this.#start, this.#end);
        else {
          const next = new Uint8Array(need * 2);
          next.set(this.#store.subarray(this.#start, this.#end));
          this.#store = next;
        }
        this.#start = 0;
        this.#end = len;
      }
      const got = await this.#conn.read(this.#store.subarray(this.#end));
      if (got === null) return false;
      this.#end += got;
    }
    return true;
  }

  /** The next `n` buffered bytes: a view, valid until the next read. */
  #take(n: number): Uint8Array {
    const out = this.#store.subarray(this.#start, this.#start + n);
    this.#start += n;
    return out;
  }

  /** The response head, without its blank line. @throws {Error} when it is cut short or too long. */
  async head(): Promise<string> {
    for (let from = 0;;) {
      const end = indexOfCRLF2(this.#buf, from);
      if (end >= 0) return new TextDecoder().decode(this.#take(end + 4)).slice(0, -4);
      from = Math.max(0, this.#buf.length - 3);
      if (this.#buf.length > MAX_HEAD) throw new Error("the server's answer has a head over 64 KiB");
      if (!(await this.#fill(this.#buf.length + 1))) throw new Error("the server closed the connection");
    }
  }

  /** A refusal's body (at most 64 KiB: a `Status` is small). */
  async body(contentLength: string | undefined): Promise<string> {
    const want = Math.min(
      contentLength === undefined ? MAX_REFUSAL_BODY : Number(contentLength),
      MAX_REFUSAL_BODY,
    );
    await this.#fill(want).catch(() => false);
    return new TextDecoder().decode(this.#buf.subarray(0, want));
  }

  /**
   * The next whole message (continuations joined; pings answered), `closed` at a close frame or the
   * connection's end, `too-large` past `max` bytes.
   */
  async message(conn: Deno.Conn, max: number): Promise<Uint8Array | "closed" | "too-large"> {
    const parts: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      if (!(await this.#fill(2))) return "closed";
      const fin = (this.#buf[0] & 0x80) !== 0;
      const opcode = this.#buf[0] & 0x0f;
      const masked = (this.#buf[1] & 0x80) !== 0;
      let len = this.#buf[1] & 0x7f;
      let at = 2;
      if (len === 126) {
        if (!(await this.#fill(4))) return "closed";
        len = (this.#buf[2] << 8) | this.#buf[3];
        at = 4;
      } else if (len === 127) {
        if (!(await this.#fill(10))) return "closed";
        const big = new DataView(this.#buf.buffer, this.#buf.byteOffset + 2, 8).getBigUint64(0);
        if (big > BigInt(max)) return "too-large";
        len = Number(big);
        at = 10;
      }
      if (size + len > max) return "too-large";
      const maskAt = at;
      if (masked) at += 4;
      if (!(await this.#fill(at + len))) return "closed";
      const frame = this.#take(at + len);
      const payload = frame.slice(at);
      if (masked) { for (let i = 0; i < payload.length; i++) payload[i] ^= frame[maskAt + (i % 4)]; }
      if (opcode === 0x8) return "closed";
      if (opcode === 0x9) {
        await writeAll(conn, clientFrame(0xa, payload.subarray(0, 125)));
        continue;
      }
      if (opcode === 0xa) continue;
      parts.push(payload);
      size += payload.length;
      if (fin) {
        if (parts.length === 1) return parts[0];
        const whole = new Uint8Array(size);
        let off = 0;
        for (const p of parts) whole.set(p, (off += p.length) - p.length);
        return whole;
      }
    }
  }
}

function indexOfCRLF2(b: Uint8Array, from: number): number {
  for (let i = from; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}
