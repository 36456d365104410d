/**
 * The userspace mode's families as one provider: one proxier per IP family (each serves the
 * Services of its family, with its own listeners and portal rules), the events fanned out to both,
 * and `explain` asking the proxier of the connection's family where its listeners send it.
 * @module
 */
import type { Connection } from "../family_view.ts";
import { MetaProxier } from "../meta_proxier.ts";
import type { ModeProvider } from "../mode_definition.ts";
import type { IPFamily } from "../model/types.ts";
import type { UserspaceProxier } from "./proxier.ts";

/** Returns the provider over `families` (one proxier per IP family); see the module doc. */
export function userspaceProvider(families: readonly UserspaceProxier[]): ModeProvider {
  return Object.assign(new MetaProxier(families), {
    close: () => families.forEach((f) => f.close()),
    onStop: families[0].onStop,
    explain: {
      views: () => families.map((f) => f.familyView()),
      answer: (c: Connection, family: IPFamily) =>
        families.find((f) => f.family === family)?.explain.answer(c),
    },
  });
}
