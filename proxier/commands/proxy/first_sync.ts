/**
 * The line a start says once every family's first sync is in the kernel: what it programmed and how
 * long after the process started, at the default verbosity (an operator's first question on a node).
 * @module
 */
import type { FamilyView } from "../../family_view.ts";
import type { Logger } from "../../runtime/logger.ts";

/**
 * Says the first sync is in: the Services and endpoints of `views`, and how long after the start the
 * last family's sync ended, `agoMs` before now (the collection that follows a full sync is not counted).
 */
export function sayFirstSync(log: Logger, views: readonly FamilyView[], agoMs = 0): void {
  // Read before counting: the count walks every Service and endpoint (tens of ms at 50,000), and
  // the sync it says was in the kernel before that walk began.
  const sinceStartMs = Math.round(performance.now() - Math.max(0, agoMs));
  const services = new Set<string>();
  const endpoints = new Set<string>();
  for (const v of views) {
    for (const s of v.services.values()) services.add(s.service);
    for (const eps of v.endpoints.values()) for (const e of eps) endpoints.add(e.key);
  }
  log.info("First sync in the kernel", {
    services: services.size,
    endpoints: endpoints.size,
    sinceStartMs,
  });
}
