/**
 * Where a process's nft session transactions are written (`nft_session.ts`): a directory of its own
 * in the temporary directory, `kube-proxy-deno-nft-XXXX/`, whose `owner` file the process holds an
 * exclusive flock on while it has a session open. The kernel drops that lock when the process ends,
 * however it ends, so a file a killed process left mid-transaction is found: the next process to
 * make its directory removes every other such directory whose lock it can take. A directory still
 * without its `owner` (made a moment ago, its owner file locked before it is named) is left for a
 * minute. The last session to close removes the directory, so a process stopped in order leaves
 * nothing behind.
 * @module
 */

/** The prefix of each process's directory in the temporary directory. */
export const TRANSACTION_DIR_PREFIX = "kube-proxy-deno-nft-";

/** How old a directory with no `owner` file must be before another process removes it. */
const UNOWNED_GRACE_MS = 60_000;

/** A process's transaction directory; see the module doc. Construction touches nothing. */
export class TransactionFiles {
  readonly #root: string | undefined;
  #dir: string | undefined;
  #owner: Deno.FsFile | undefined;
  #users = 0;
  #seq = 0;

  /** `root`: the directory to make it in (default: the temporary directory, `TMPDIR` else `/tmp`). */
  constructor(root?: string) {
    this.#root = root;
  }

  /** The directory, once a transaction was written and until the last user closed. */
  get dir(): string | undefined {
    return this.#dir;
  }

  /** Counts a user (a session started); the directory lives until each user has closed. */
  open(): void {
    this.#users++;
  }

  /** Ends a user; the last one removes the directory and lets its lock go. */
  close(): void {
    if (this.#users > 0 && --this.#users > 0) return;
    const dir = this.#dir;
    this.#dir = undefined;
    if (dir !== undefined) removeDir(dir);
    this.#owner?.close();
    this.#owner = undefined;
  }

  /**
   * Writes `text` to a new file in the directory (made, and others' left by dead processes removed,
   * the first time); returns its path, or undefined when it could not be written (the caller goes by
   * `nft -f`). The path is fit for an nft string: no quote, space or backslash.
   */
  write(text: string): string | undefined {
    let file: string | undefined;
    try {
      const dir = this.#dir ?? this.#make();
      file = `${dir}/${++this.#seq}.nft`;
      Deno.writeTextFileSync(file, text);
      return file;
    } catch {
      if (file !== undefined) removeFile(file);
      return undefined;
    }
  }

  /** Makes the directory with its locked `owner`, then removes the directories of processes gone. */
  #make(): string {
    const dir = Deno.makeTempDirSync({ dir: this.#root, prefix: TRANSACTION_DIR_PREFIX });
    try {
      if (!/^[\w/.-]+$/.test(dir)) throw new Error(`a path nft cannot be given: ${dir}`);
      const owner = Deno.openSync(`${dir}/owner.new`, { read: true, write: true, create: true });
      this.#owner = owner;
      owner.lockSync(true);
      // Named only once locked: a sweeper that finds `owner` finds it held.
      Deno.renameSync(`${dir}/owner.new`, `${dir}/owner`);
    } catch (e) {
      this.#owner?.close();
      this.#owner = undefined;
      removeDir(dir);
      throw e;
    }
    this.#dir = dir;
    sweepDeadOwners(dir.slice(0, dir.lastIndexOf("/")) || "/", dir);
    return dir;
  }
}

/**
 * Removes every transaction directory in `root` but `keep` whose owner lock is free (its process has
 * ended), or which has had no `owner` for a minute; returns the paths removed. Failures (a directory
 * another process removes at the same moment) are skipped.
 */
export function sweepDeadOwners(root: string, keep?: string): string[] {
  const removed: string[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(root)];
  } catch {
    return removed;
  }
  for (const e of entries) {
    if (!e.isDirectory || !e.name.startsWith(TRANSACTION_DIR_PREFIX)) continue;
    const dir = `${root}/${e.name}`;
    if (dir === keep) continue;
    if (ownerGone(dir) && removeDir(dir)) removed.push(dir);
  }
  return removed;
}

/** Whether `dir`'s owner has ended: its lock is free, or it never named an owner a minute on. */
function ownerGone(dir: string): boolean {
  let owner: Deno.FsFile;
  try {
    owner = Deno.openSync(`${dir}/owner`, { read: true });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) return false;
    try {
      const made = Deno.statSync(dir).mtime?.getTime() ?? Date.now();
      return Date.now() - made > UNOWNED_GRACE_MS;
    } catch {
      return false;
    }
  }
  try {
    // A live owner locked it before naming it: a free lock is a process gone.
    return owner.tryLockSync(true);
  } catch {
    return false;
  } finally {
    owner.close();
  }
}

/** Removes `dir` and what it holds; returns whether it is gone. */
function removeDir(dir: string): boolean {
  try {
    Deno.removeSync(dir, { recursive: true });
    return true;
  } catch {
    return false;
  }
}

/** Removes `file`, if it is still there. */
export function removeFile(file: string): void {
  try {
    Deno.removeSync(file);
  } catch {
    // gone already
  }
}
