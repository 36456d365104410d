/**
 * Round-robin endpoint choice with ClientIP affinity, for the userspace proxier.
 * @module
 */

/**
 * Where a service's rotation position lives: in the balancer ({@linkcode localRotation}) or shared
 * between threads (`shared_rotation.ts`), so that balancers on several threads rotate as one.
 */
export interface Rotation {
  /** Returns the position (any non-negative integer; taken modulo the endpoint count). */
  get(): number;
  /** Sets `to` if the position is still `from`; returns false when another thread moved it first. */
  move(from: number, to: number): boolean;
}

/** Returns a rotation position private to one balancer, starting at 0. */
export function localRotation(): Rotation {
  let at = 0;
  return {
    get: () => at,
    move(from, to) {
      if (at !== from) return false;
      at = to;
      return true;
    },
  };
}

interface ServiceState {
  endpoints: string[];
  rotation: Rotation;
  ttlMs: number;
  affinity: Map<string, { endpoint: string; lastUsed: number }>;
}

/** How often (in picks) expired affinity entries are swept. */
const REAP_EVERY = 1024;

/** Picks endpoints per service; see {@linkcode next}. */
export class RoundRobinBalancer {
  readonly #clock: { now(): number };
  readonly #random: () => number;
  readonly #services = new Map<string, ServiceState>();
  /** Endpoints passed over until the given time (passive health). */
  readonly #down = new Map<string, number>();
  #picks = 0;

  /** `random` is injectable so shuffles are reproducible in tests. */
  constructor(opts: { clock: { now(): number }; random?: () => number }) {
    this.#clock = opts.clock;
    this.#random = opts.random ?? Math.random;
  }

  /**
   * Sets a service's endpoints (`ip:port` strings) and affinity timeout (0: none). A new endpoint
   * set is shuffled, so that proxies on many nodes do not all start on the same endpoint (`ordered`:
   * taken in the given order, as another balancer shuffled it); the same set keeps the rotation and
   * every affinity entry. `rotation` says where the position lives (default: in this balancer).
   */
  update(
    service: string,
    endpoints: readonly string[],
    stickyMaxAgeSeconds: number,
    opts: { rotation?: Rotation; ordered?: boolean } = {},
  ): void {
    const ttlMs = stickyMaxAgeSeconds * 1000;
    const st = this.#services.get(service);
    const sorted = [...endpoints].sort();
    if (st !== undefined && st.ttlMs === ttlMs && sameList([...st.endpoints].sort(), sorted)) return;
    const shuffled = [...endpoints];
    for (let i = shuffled.length - 1; i > 0 && opts.ordered !== true; i--) {
      const j = Math.floor(this.#random() * (i + 1));
      [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
    }
    const live = new Set(endpoints);
    const affinity = new Map(
      ttlMs === 0 ? [] : [...(st?.affinity ?? [])].filter(([, a]) => live.has(a.endpoint)),
    );
    const rotation = opts.rotation ?? localRotation();
    this.#services.set(service, { endpoints: shuffled, rotation, ttlMs, affinity });
  }

  /** Forgets a service. */
  remove(service: string): void {
    this.#services.delete(service);
  }

  /** Returns the service's endpoints in rotation order (for tests and debugging). */
  endpoints(service: string): readonly string[] {
    return this.#services.get(service)?.endpoints ?? [];
  }

  /**
   * Returns the endpoint for a new connection from `clientIP`, or undefined when the service has
   * none left to try. With affinity, a client keeps its endpoint until the timeout passes without
   * use; `resetAffinity` (after a failed dial) moves it on. Endpoints in `exclude` (those this
   * connection already tried) are never returned; endpoints marked down ({@linkcode markDown}) are
   * passed over while another one is available.
   */
  next(
    service: string,
    clientIP: string,
    opts: { resetAffinity?: boolean; exclude?: ReadonlySet<string> } = {},
  ): string | undefined {
    const st = this.#services.get(service);
    if (st === undefined || st.endpoints.length === 0) return undefined;
    const now = this.#clock.now();
    if (++this.#picks % REAP_EVERY === 0) this.#reap(now);
    const usable = (ep: string) => !(opts.exclude?.has(ep) ?? false);
    if (st.ttlMs > 0 && opts.resetAffinity !== true) {
      const a = st.affinity.get(clientIP);
      if (a !== undefined && now - a.lastUsed < st.ttlMs && usable(a.endpoint)) {
        a.lastUsed = now;
        return a.endpoint;
      }
    }
    // Retried only when another thread moved a shared position between our read and our move.
    let at: number;
    let i: number | undefined;
    do {
      at = st.rotation.get();
      i = this.#pick(st.endpoints, at % st.endpoints.length, usable, now);
      if (i === undefined) return undefined;
    } while (!st.rotation.move(at, (i + 1) % st.endpoints.length));
    const endpoint = st.endpoints[i];
    if (st.ttlMs > 0) st.affinity.set(clientIP, { endpoint, lastUsed: now });
    return endpoint;
  }

  /**
   * Returns the index of the next endpoint from `start` that this connection may use and that is
   * not down; when every usable one is down, the first usable one (down may be wrong; nothing else
   * is left).
   */
  #pick(
    endpoints: readonly string[],
    start: number,
    usable: (ep: string) => boolean,
    now: number,
  ): number | undefined {
    let fallback: number | undefined;
    for (let k = 0; k < endpoints.length; k++) {
      const i = (start + k) % endpoints.length;
      const ep = endpoints[i];
      if (!usable(ep)) continue;
      fallback ??= i;
      if ((this.#down.get(ep) ?? 0) <= now) return i;
    }
    return fallback;
  }

  /**
   * Passive health: `endpoint` refused or timed out; new connections pass it over for `forMs`
   * (it comes back by itself after that).
   */
  markDown(endpoint: string, forMs: number): void {
    this.#down.set(endpoint, this.#clock.now() + forMs);
    if (this.#down.size > 4096) {
      const now = this.#clock.now();
      for (const [ep, until] of this.#down) if (until <= now) this.#down.delete(ep);
    }
  }

  #reap(now: number): void {
    for (const st of this.#services.values()) {
      for (const [ip, a] of st.affinity) if (now - a.lastUsed >= st.ttlMs) st.affinity.delete(ip);
    }
  }
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
