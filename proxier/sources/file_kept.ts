/**
 * What the running file source refuses to apply: a state its start would refuse, or one that would
 * move the node's traffic without anyone asking. The source vanished (the file, or the directory),
 * or emptied (nothing the proxy reads is left: `: > objects.yaml`, every file of a directory gone),
 * or no longer defines the Node the proxy acts for (a renamed Node would put its NodePorts on every
 * address). Then every object last applied stays, and the proxy says so until the source is
 * usable again. A directory's file removed while others remain is a change like any other: its
 * objects go (as kubelet's static pods).
 * @module
 */
import type { KubernetesObject } from "@kubernetes/client-node";

/** Why the running source's changes are not applied, and since when. */
export interface SourceKept {
  readonly reason: string;
  readonly since: Date;
}

/**
 * Returns why the change `reads` (per file: its new objects, or undefined when it is gone) must
 * not be applied over `applied` (the objects last applied, per file), or undefined when it may.
 * `nodeKey` is the key of the Node the proxy acts for.
 */
export function keptReason(
  applied: ReadonlyMap<string, ReadonlyMap<string, KubernetesObject>>,
  reads: ReadonlyMap<string, { readonly objects: ReadonlyMap<string, KubernetesObject> } | undefined>,
  path: string,
  nodeKey: string,
): string | undefined {
  let objects = 0;
  let hadNode = false;
  let hasNode = false;
  for (const f of new Set([...applied.keys(), ...reads.keys()])) {
    const before = applied.get(f);
    const after = reads.has(f) ? reads.get(f)?.objects : before;
    hadNode ||= before?.has(nodeKey) ?? false;
    hasNode ||= after?.has(nodeKey) ?? false;
    objects += after?.size ?? 0;
  }
  const source = JSON.stringify(path);
  if (objects === 0) {
    const gone = [...reads].some(([, r]) => r === undefined);
    return gone
      ? `${source} is gone: nothing the proxy reads is left`
      : `${source} holds no Service, EndpointSlice, Node or ServiceCIDR any more (emptied)`;
  }
  if (hadNode && !hasNode) {
    return `${source} no longer defines ${nodeKey.replace("/", ' "')}", the node this proxy acts for ` +
      "(without it the NodePorts would move to every address)";
  }
  return undefined;
}
