/**
 * The errors the model, the options and the sources raise. Each names what failed and keeps the
 * error that caused it (`cause`), so a log line shows the whole chain. Kernel-tool errors
 * (`ExecError`, `RestoreError`) live beside their executors in `iptables/`.
 * @module
 */

/** A field makes a whole object (or one entry of it) unusable; names the object and the field. */
export class ValidationError extends Error {
  /** @param object `Kind ns/name`; @param field the JSON path of the bad field. */
  constructor(readonly object: string, readonly field: string, detail: string, options?: ErrorOptions) {
    super(`${object}: invalid ${field}: ${detail}`, options);
    this.name = "ValidationError";
  }
}

/** A bad flag or config value; main prints the message and exits 2. */
export class UsageError extends Error {
  /** @param message names the flag (or config field) and the value. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UsageError";
  }
}

/** A watch request failed; carries the HTTP status, as client-node's informer expects (410 -> relist). */
export class WatchError extends Error {
  /** @param statusCode the HTTP status of the failed request; undefined when none came. */
  constructor(message: string, readonly statusCode?: number, options?: ErrorOptions) {
    super(message, options);
    this.name = "WatchError";
  }
}

/** Renders a value for an error message: JSON, bounded to 80 characters, on one line. */
export function show(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/**
 * Returns how messages name an object: its kind and `namespace/name` as one quoted string
 * (`Service "evil/badip"`), whatever the fields hold; never throws.
 */
export function objectName(kind: string, namespace: unknown, name: unknown): string {
  return `${kind} ${show(`${namespace ?? "default"}/${typeof name === "string" ? name : show(name)}`)}`;
}

/** The chosen mode cannot run on this node; the message says what is missing. main exits 1. */
export class ModeUnavailableError extends Error {
  /** @param message names what is missing and what to do. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ModeUnavailableError";
  }
}

/** The API server cannot be reached as configured: a kubeconfig that is missing, unreadable or unsupported. */
export class KubeconfigError extends Error {
  /** @param message names the file (or flag) and the field. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "KubeconfigError";
  }
}

/**
 * Returns `e`'s message with the messages of its causes, outermost first, each said once: a failed
 * fetch says why (`fetch failed: ... tcp connect error: Connection refused`, a certificate the CA
 * does not sign), as upstream's client errors do.
 */
export function describeError(e: unknown): string {
  const parts: string[] = [];
  for (const msg of causeMessages(e)) {
    if (msg !== "" && !parts.some((p) => p.includes(msg))) parts.push(msg);
  }
  return parts.join(": ");
}

/** Returns the messages of `e` and of its causes, outermost first (at most 8: a cycle of causes ends). */
export function causeMessages(e: unknown): string[] {
  const out: string[] = [];
  for (let x: unknown = e, depth = 0; x !== undefined && x !== null && depth < 8; depth++) {
    out.push(x instanceof Error ? x.message : String(x));
    x = x instanceof Error ? x.cause : undefined;
  }
  return out;
}

/**
 * Returns why `e` happened in one short line (at most 120 characters): the last two parts of its
 * innermost cause's message (`tcp connect error: Connection refused (os error 111)`, `invalid peer
 * certificate: UnknownIssuer`), which is what an operator acts on; the rest is for `describeError`.
 */
export function shortError(e: unknown): string {
  let x: unknown = e;
  for (let depth = 0; x instanceof Error && x.cause !== undefined && depth < 8; depth++) x = x.cause;
  const msg = (x instanceof Error ? x.message : String(x)).split("\n")[0].split(": ").slice(-2).join(": ");
  return msg.length <= 120 ? msg : `${msg.slice(0, 117)}...`;
}
