/**
 * What the program drives, whatever the mode: a proxier takes the sources' events and syncs them
 * to its datapath from its own loop (`BaseProxier`, `MetaProxier` over two families, the modes'
 * providers).
 * @module
 */
import type { EventHandler } from "./sources/handlers.ts";

/** A proxier: takes events (`sources/handlers.ts`), syncs them to a datapath from its loop. */
export interface Provider extends EventHandler {
  /** Asks for a sync; the runner rate-limits. */
  sync(): void;
  /** Runs syncs until `signal` aborts; resolves after the last sync finishes. */
  syncLoop(signal: AbortSignal): Promise<void>;
}
