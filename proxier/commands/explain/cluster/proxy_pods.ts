/**
 * The proxy pods `explain --all-nodes` asks, one or more per node, and what it runs in each: the
 * container that runs the proxy (`kube-proxy` or `kube-proxy-deno` in its command, else the first),
 * and the `explain` command line that reaches that proxy, with the proxy's own `--config` and
 * `--metrics-bind-address` (kubeadm's DaemonSet gives `--config`; the metrics address is where the
 * in-pod `explain` asks). A pod that cannot be asked says why.
 * @module
 */
import type { V1Container, V1ContainerState, V1Node, V1Pod } from "@kubernetes/client-node";

/** A proxy pod on a node, ready to be asked, or why it cannot be. */
export interface ProxyPod {
  readonly node: string;
  readonly pod: string;
  readonly container: string;
  /** The container's image, for what it runs when it is not this program. */
  readonly image: string;
  /** The container's readiness (its probe: the proxy's `/healthz`); a pod not ready is still asked. */
  readonly ready: boolean;
  /** The flags passed on to the in-pod `explain`. */
  readonly proxyFlags: readonly string[];
  /** Why it cannot be asked (its container is not running); undefined when it can. */
  readonly notRunning?: string;
}

/** The flags of the proxy's command line the in-pod `explain` needs to find the running proxy. */
const PASSED_ON = ["--config", "--metrics-bind-address"];

/** Returns the proxy pods by node, each node's sorted by name; pods not yet on a node are left out. */
export function proxyPodsByNode(pods: readonly V1Pod[]): Map<string, ProxyPod[]> {
  const byNode = new Map<string, ProxyPod[]>();
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    const name = pod.metadata?.name;
    if (node === undefined || node === "" || name === undefined) continue;
    const container = proxyContainer(pod.spec?.containers ?? []);
    if (container === undefined) continue;
    const status = pod.status?.containerStatuses?.find((s) => s.name === container.name);
    const running = pod.status?.phase === "Running" && status?.state?.running !== undefined;
    const entry: ProxyPod = {
      node,
      pod: name,
      container: container.name,
      image: container.image ?? "",
      ready: status?.ready === true,
      proxyFlags: passedOn(container, pod),
      ...(running ? {} : { notRunning: whyNotRunning(pod, status?.state) }),
    };
    byNode.set(node, [...byNode.get(node) ?? [], entry].sort((a, b) => a.pod.localeCompare(b.pod)));
  }
  return byNode;
}

/** Returns the names of `nodes`, sorted. */
export function nodeNames(nodes: readonly V1Node[]): string[] {
  return nodes.map((n) => n.metadata?.name).filter((n): n is string => n !== undefined).sort();
}

function proxyContainer(containers: readonly V1Container[]): V1Container | undefined {
  const runsProxy = (c: V1Container) =>
    [...c.command ?? [], ...c.args ?? []].some((w) => /(^|\/)kube-proxy(-deno)?$/.test(w)) ||
    /kube-proxy/.test(c.image ?? "");
  return containers.find(runsProxy) ?? containers[0];
}

/** The container's `--config` and `--metrics-bind-address`, `$(VAR)` references expanded as the kubelet does. */
function passedOn(c: V1Container, pod: V1Pod): string[] {
  const words = [...c.command ?? [], ...c.args ?? []];
  const out: string[] = [];
  words.forEach((w, i) => {
    for (const flag of PASSED_ON) {
      if (w.startsWith(`${flag}=`)) out.push(`${flag}=${expand(w.slice(flag.length + 1), c, pod)}`);
      else if (w === flag && words[i + 1] !== undefined) out.push(`${flag}=${expand(words[i + 1], c, pod)}`);
    }
  });
  return out;
}

/**
 * `$(NAME)` from the container's env (a value, or the pod's node name through `spec.nodeName`), `$$`
 * an escaped `$`; a reference that cannot be resolved stays as written, as the kubelet leaves it.
 */
function expand(s: string, c: V1Container, pod: V1Pod): string {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string | undefined) => {
    if (name === undefined) return "$";
    const e = c.env?.find((v) => v.name === name);
    if (e?.value !== undefined) return e.value;
    if (e?.valueFrom?.fieldRef?.fieldPath === "spec.nodeName") return pod.spec?.nodeName ?? whole;
    return whole;
  });
}

function whyNotRunning(pod: V1Pod, state: V1ContainerState | undefined): string {
  const phase = pod.status?.phase ?? "Unknown";
  if (state?.waiting !== undefined) {
    return `its container is waiting (${state.waiting.reason ?? "no reason"}); pod ${phase}`;
  }
  if (state?.terminated !== undefined) {
    const t = state.terminated;
    return `its container has ended (${t.reason ?? "exit"}, code ${t.exitCode}); pod ${phase}`;
  }
  return `pod ${phase}, its container not running`;
}
