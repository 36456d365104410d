import { assertEquals } from "../../../../tests/support/assert.ts";
import { proxyPod } from "../../../../tests/support/proxy_cluster.ts";
import { proxyPodsByNode } from "./proxy_pods.ts";

Deno.test("proxy pods: kubeadm's pod passes on its --config; $(VAR) expands from env and the node name; both flag forms", () => {
  const kubeadm = proxyPod("kube-proxy-x1", "node-a", "/var/lib/kube-proxy/config.conf");
  const custom = proxyPod("kube-proxy-x2", "node-b", "unused");
  custom.spec!.containers = [
    { name: "sidecar", image: "busybox", command: ["sleep", "inf"] },
    {
      name: "proxy",
      image: "registry.example/kube-proxy-deno:0.1.0",
      args: [
        "--metrics-bind-address",
        "$(POD_IP):10249",
        "--config=/etc/$(NODE)/c.conf",
        "--v=2",
        "--x=$$(LIT)",
      ],
      env: [
        { name: "POD_IP", value: "10.0.0.7" },
        { name: "NODE", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
      ],
    },
  ];
  custom.status!.containerStatuses![0].name = "proxy";
  const byNode = proxyPodsByNode([custom, kubeadm]);
  assertEquals([...byNode.keys()].sort(), ["node-a", "node-b"]);
  assertEquals(byNode.get("node-a")![0].proxyFlags, ["--config=/var/lib/kube-proxy/config.conf"]);
  const b = byNode.get("node-b")![0];
  assertEquals(b.container, "proxy", "the container that runs the proxy, not the first");
  assertEquals(b.proxyFlags, ["--metrics-bind-address=10.0.0.7:10249", "--config=/etc/node-b/c.conf"]);
  assertEquals(b.notRunning, undefined);
});

Deno.test("proxy pods: a pod whose container waits or has ended says why; a pod on no node yet is left out", () => {
  const waiting = proxyPod("kube-proxy-w", "node-a", "c", { waiting: "CrashLoopBackOff" });
  const ended = proxyPod("kube-proxy-e", "node-b", "c");
  ended.status = {
    phase: "Failed",
    containerStatuses: [{
      name: "kube-proxy",
      ready: false,
      restartCount: 3,
      image: "",
      imageID: "",
      state: { terminated: { exitCode: 1, reason: "Error" } },
    }],
  };
  const unscheduled = proxyPod("kube-proxy-u", "", "c");
  const byNode = proxyPodsByNode([waiting, ended, unscheduled]);
  assertEquals(
    byNode.get("node-a")![0].notRunning,
    "its container is waiting (CrashLoopBackOff); pod Pending",
  );
  assertEquals(byNode.get("node-b")![0].notRunning, "its container has ended (Error, code 1); pod Failed");
  assertEquals(byNode.size, 2);
});
