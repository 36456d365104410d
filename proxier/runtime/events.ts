/**
 * Kubernetes Events, as upstream kube-proxy posts them (`events.k8s.io/v1`, reporting controller
 * `kube-proxy`): `Starting` on the Node, `FailedToStartProxierHealthcheck` and
 * `FailedToStartMetricServer` on the Node, `FailedToStartServiceHealthcheck` on a Service, and
 * warnings an operator should see in `kubectl describe node`. Best effort: an Event that cannot be
 * posted is logged at debug level and never delays or fails the proxy.
 * @module
 */
import type { Logger } from "./logger.ts";
import { describeError } from "./errors.ts";

/** What an Event is about (upstream's ObjectReference; Nodes use their name as UID, as upstream). */
export interface ObjectRef {
  readonly kind: "Node" | "Service";
  readonly name: string;
  readonly namespace?: string;
}

/** One Event. */
export interface EventSpec {
  readonly regarding: ObjectRef;
  readonly type: "Normal" | "Warning";
  /** CamelCase, machine-readable (`Starting`, `FailedToStartMetricServer`). */
  readonly reason: string;
  /** What was being done (`StartKubeProxy`, `Listen`). */
  readonly action: string;
  /** Human-readable detail (upstream: the error). */
  readonly note: string;
}

/** Posts Events; each component receives one. */
export interface EventRecorder {
  record(e: EventSpec): void;
}

/** A recorder that posts nothing (the file source has no API server to post to). */
export const nullRecorder: EventRecorder = { record() {} };

/** Returns a Node reference as upstream builds it (UID = name). */
export function nodeRef(name: string): ObjectRef {
  return { kind: "Node", name };
}

/** Go's MicroTime: RFC 3339 with microseconds. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/**
 * Returns the `events.k8s.io/v1` Event body for `e` at `nowMs`, reported by `instance` (upstream's
 * name: `<regarding>.<unix nanoseconds in hex>`).
 */
export function eventBody(e: EventSpec, instance: string, nowMs: number): Record<string, unknown> {
  const ns = e.regarding.namespace ?? "default";
  const nanos = BigInt(Math.round(nowMs)) * 1_000_000n;
  return {
    apiVersion: "events.k8s.io/v1",
    kind: "Event",
    metadata: { name: `${e.regarding.name}.${nanos.toString(16)}`, namespace: ns },
    eventTime: microTime(nowMs),
    reportingController: "kube-proxy",
    reportingInstance: instance,
    action: e.action,
    reason: e.reason,
    regarding: {
      kind: e.regarding.kind,
      name: e.regarding.name,
      ...(e.regarding.namespace === undefined ? {} : { namespace: e.regarding.namespace }),
      uid: e.regarding.kind === "Node" ? e.regarding.name : `${ns}/${e.regarding.name}`,
    },
    note: e.note.slice(0, 1024),
    type: e.type,
  };
}

/** Posts Events through `post` (the API client's create), in the background. */
export class ApiEventRecorder implements EventRecorder {
  readonly #post: (path: string, body: unknown) => Promise<number>;
  readonly #instance: string;
  readonly #log: Logger;
  readonly #now: () => number;

  /** `instance` names this proxy (`kube-proxy-<node>`); nothing is posted until {@linkcode record}. */
  constructor(o: {
    post: (path: string, body: unknown) => Promise<number>;
    instance: string;
    log: Logger;
    now?: () => number;
  }) {
    this.#post = o.post;
    this.#instance = o.instance;
    this.#log = o.log;
    this.#now = o.now ?? Date.now;
  }

  /** @inheritdoc */
  record(e: EventSpec): void {
    const body = eventBody(e, this.#instance, this.#now());
    const ns = (body.metadata as { namespace: string }).namespace;
    this.#post(`/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/events`, body).then(
      (status) => {
        if (status >= 300) this.#log.debug("Event not posted", { reason: e.reason, status });
      },
      (err) => this.#log.debug("Event not posted", { reason: e.reason, error: describeError(err) }),
    );
  }
}
