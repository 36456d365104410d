/**
 * Round-robin endpoint choice with ClientIP affinity, for the userspace proxier.
 * @module
 */

interface ServiceState {
  endpoints: string[];
  index: number;
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
   * set is shuffled, so that proxies on many nodes do not all start on the same endpoint; the same
   * set keeps the rotation and every affinity entry.
   */
  update(service: string, endpoints: readonly string[], stickyMaxAgeSeconds: number): void {
    const ttlMs = stickyMaxAgeSeconds * 1000;
    const st = this.#services.get(service);
    const sorted = [...endpoints].sort();
    if (st !== undefined && st.ttlMs === ttlMs && sameList([...st.endpoints].sort(), sorted)) return;
    const shuffled = [...endpoints];
    for (let i = shuffled.length - 1; i > 0; i--) {
      const j = Math.floor(this.#random() * (i + 1));
      [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
    }
    const live = new Set(endpoints);
    const affinity = new Map(
      ttlMs === 0 ? [] : [...(st?.affinity ?? [])].filter(([, a]) => live.has(a.endpoint)),
    );
    this.#services.set(service, { endpoints: shuffled, index: 0, ttlMs, affinity });
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
    // The next endpoint in rotation that this connection has not tried and that is not down; when
    // every untried one is down, the first untried one (down may be wrong; nothing else is left).
    let fallback: number | undefined;
    let chosen: number | undefined;
    for (let k = 0; k < st.endpoints.length; k++) {
      const i = (st.index + k) % st.endpoints.length;
      const ep = st.endpoints[i];
      if (!usable(ep)) continue;
      fallback ??= i;
      if ((this.#down.get(ep) ?? 0) <= now) {
        chosen = i;
        break;
      }
    }
    const i = chosen ?? fallback;
    if (i === undefined) return undefined;
    const endpoint = st.endpoints[i];
    st.index = (i + 1) % st.endpoints.length;
    if (st.ttlMs > 0) st.affinity.set(clientIP, { endpoint, lastUsed: now });
    return endpoint;
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
