/**
 * This build's version: what `--version` prints, `/statusz` and `kubernetes_build_info` show.
 * @module
 */

/** The version, semver. */
export const VERSION = "0.1.0";
