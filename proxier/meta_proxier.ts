/**
 * Dual-stack: one proxier per IP family behind one handler, as upstream's metaProxier.
 * @module
 */
import type { V1EndpointSlice, V1Node, V1Service } from "@kubernetes/client-node";
import type { Provider } from "./provider.ts";

/** Forwards every event to each family's proxier; runs their loops together. */
export class MetaProxier implements Provider {
  readonly #proxiers: readonly Provider[];

  /** `proxiers`: one per family; each filters the objects of its own family. */
  constructor(proxiers: readonly Provider[]) {
    this.#proxiers = proxiers;
  }

  /** @inheritdoc */
  onServiceAdd(s: V1Service): void {
    for (const p of this.#proxiers) p.onServiceAdd(s);
  }
  /** @inheritdoc */
  onServiceUpdate(o: V1Service, s: V1Service): void {
    for (const p of this.#proxiers) p.onServiceUpdate(o, s);
  }
  /** @inheritdoc */
  onServiceDelete(s: V1Service): void {
    for (const p of this.#proxiers) p.onServiceDelete(s);
  }
  /** @inheritdoc */
  onServicesSynced(): void {
    for (const p of this.#proxiers) p.onServicesSynced();
  }
  /** @inheritdoc */
  onEndpointSliceAdd(s: V1EndpointSlice): void {
    for (const p of this.#proxiers) p.onEndpointSliceAdd(s);
  }
  /** @inheritdoc */
  onEndpointSliceUpdate(o: V1EndpointSlice, s: V1EndpointSlice): void {
    for (const p of this.#proxiers) p.onEndpointSliceUpdate(o, s);
  }
  /** @inheritdoc */
  onEndpointSliceDelete(s: V1EndpointSlice): void {
    for (const p of this.#proxiers) p.onEndpointSliceDelete(s);
  }
  /** @inheritdoc */
  onEndpointSlicesSynced(): void {
    for (const p of this.#proxiers) p.onEndpointSlicesSynced();
  }
  /** @inheritdoc */
  onNodeAdd(n: V1Node): void {
    for (const p of this.#proxiers) p.onNodeAdd(n);
  }
  /** @inheritdoc */
  onNodeUpdate(o: V1Node, n: V1Node): void {
    for (const p of this.#proxiers) p.onNodeUpdate(o, n);
  }
  /** @inheritdoc */
  onNodeDelete(n: V1Node): void {
    for (const p of this.#proxiers) p.onNodeDelete(n);
  }
  /** @inheritdoc */
  onNodeSynced(): void {
    for (const p of this.#proxiers) p.onNodeSynced();
  }
  /** @inheritdoc */
  onServiceCIDRsChanged(cidrs: readonly string[]): void {
    for (const p of this.#proxiers) p.onServiceCIDRsChanged(cidrs);
  }
  /** @inheritdoc */
  sync(): void {
    for (const p of this.#proxiers) p.sync();
  }
  /** Runs every family's loop; resolves when all have stopped. */
  async syncLoop(signal: AbortSignal): Promise<void> {
    await Promise.all(this.#proxiers.map((p) => p.syncLoop(signal)));
  }
}
