/**
 * A conntrack that records the deletions asked of it, for tests.
 * @module
 */
import type { Conntrack } from "../conntrack.ts";

/** Records every deletion as `op args` in {@linkcode calls}. */
export class RecordingConntrack implements Conntrack {
  /** Every call, as `op args`. */
  readonly calls: string[] = [];
  /** @inheritdoc */
  clearServiceIP(ip: string, protocol: string, port?: number): Promise<void> {
    this.calls.push(`service ${ip} ${protocol}${port ? ` ${port}` : ""}`);
    return Promise.resolve();
  }
  /** @inheritdoc */
  clearEndpoint(origDst: string, endpointIP: string, protocol: string): Promise<void> {
    this.calls.push(`endpoint ${origDst} ${endpointIP} ${protocol}`);
    return Promise.resolve();
  }
  /** @inheritdoc */
  clearNodePort(port: number, protocol: string, endpointIP?: string): Promise<void> {
    this.calls.push(`nodeport ${port} ${protocol}${endpointIP ? ` ${endpointIP}` : ""}`);
    return Promise.resolve();
  }
}
