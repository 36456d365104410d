/**
 * Small assertion helpers over `node:assert/strict`, returning the thrown error where useful.
 * @module
 */
import { AssertionError, deepStrictEqual, match, notDeepStrictEqual, ok } from "node:assert/strict";

/** Runs `check`; a failure keeps its own text (the values and their difference) after `msg`. */
function withMessage(check: () => void, msg?: string): void {
  try {
    check();
  } catch (e) {
    if (msg === undefined || !(e instanceof AssertionError)) throw e;
    throw new AssertionError({ message: `${msg}\n${e.message}`, actual: e.actual, expected: e.expected });
  }
}

/** Asserts deep strict equality; a failure shows both values and `msg`. */
export function assertEquals<T>(actual: T, expected: T, msg?: string): void {
  withMessage(() => deepStrictEqual(actual, expected), msg);
}

/** Asserts deep strict inequality; a failure shows the value and `msg`. */
export function assertNotEquals<T>(actual: T, expected: T, msg?: string): void {
  withMessage(() => notDeepStrictEqual(actual, expected), msg);
}

/** Asserts a truthy value. */
export function assert(value: unknown, msg?: string): asserts value {
  ok(value, msg ?? "expected a truthy value");
}

/** Asserts that `s` matches `re`. */
export function assertMatch(s: string, re: RegExp, msg?: string): void {
  match(s, re, msg ?? `${JSON.stringify(s)} does not match ${re}`);
}

/** Asserts that `fn` throws an instance of `cls`; returns the error. */
export function assertThrows<E extends Error>(fn: () => unknown, cls: new (...a: never[]) => E): E {
  try {
    fn();
  } catch (e) {
    ok(e instanceof cls, `expected ${cls.name}, got ${e}`);
    return e as E;
  }
  throw new Error(`expected ${cls.name} to be thrown`);
}

/** Asserts that `fn` rejects with an instance of `cls`; returns the error. */
export async function assertRejects<E extends Error>(
  fn: () => Promise<unknown>,
  cls: new (...a: never[]) => E,
): Promise<E> {
  try {
    await fn();
  } catch (e) {
    ok(e instanceof cls, `expected ${cls.name}, got ${e}`);
    return e as E;
  }
  throw new Error(`expected ${cls.name} to be rejected`);
}
