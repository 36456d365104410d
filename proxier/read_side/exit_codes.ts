/**
 * The exit codes of the commands that compare a model with a datapath (`explain`) or two datapaths
 * (`migrate`): a script can tell "checked, and the same" from "something could not be checked".
 * @module
 */

/** Everything was checked, and nothing differs. */
export const EXIT_SAME = 0;
/** Something differs (a DISAGREEMENT, a change), or what was asked could not be read. */
export const EXIT_DIFFERS = 1;
/** Bad input: a flag, an argument, a file that names nothing to compare. */
export const EXIT_BAD_INPUT = 2;
/** Nothing checked differs, but something could not be checked (it is named, with why). */
export const EXIT_NOT_CHECKED = 3;

/** Returns the exit code for `differs` things that differ and `unchecked` that could not be checked. */
export function comparisonExit(differs: number, unchecked: number): number {
  return differs > 0 ? EXIT_DIFFERS : unchecked > 0 ? EXIT_NOT_CHECKED : EXIT_SAME;
}
