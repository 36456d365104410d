/**
 * What a mode does with kube-router's per-Service scheduler annotations
 * (`kube-router.io/service.scheduler`, `kube-router.io/service.schedflags`; the model reads them in
 * `service_port.ts`). Each mode gives its own policy (`proxier/<mode>/schedulers.ts`); the base
 * proxier speaks it through the Service's warnings and `explain`'s view.
 * @module
 */
import type { ServicePortInfo } from "./model/types.ts";

/** One mode's answer to a scheduler annotation. */
export interface SchedulerPolicy {
  /**
   * Returns what the mode says when it does not do what annotation `scheduler` asks (logged once per
   * Service version and posted as an Event), or undefined when it does.
   */
  notice(scheduler: string): string | undefined;
  /**
   * Returns how the mode balances `svc`'s new connections, in a few words for `explain`, or null
   * when there is nothing to say (no annotation, and the mode has one way).
   */
  describe(svc: ServicePortInfo): string | null;
}

/**
 * Returns the policy of a mode that balances one way whatever a Service asks (`way`: "random",
 * "round robin"), honouring only the annotations in `honoured` (which ask for that same way); the
 * others are named as not honoured, pointing at the nftables mode, which honours the most.
 */
export function oneWayPolicy(mode: string, way: string, honoured: readonly string[] = []): SchedulerPolicy {
  const ignored = (s: string | undefined): s is string => s !== undefined && !honoured.includes(s);
  const balances = way === "random" ? "at random" : way;
  return {
    notice: (scheduler) =>
      ignored(scheduler)
        ? `kube-router.io/service.scheduler "${scheduler}" is not honoured in ${mode} mode, which balances ` +
          `${balances}; nftables mode honours rr, sh, dh and mh`
        : undefined,
    describe: (svc) => ignored(svc.scheduler) ? `${way}; ${svc.scheduler} is not honoured here` : null,
  };
}
