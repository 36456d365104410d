/**
 * Started by tests/userspace/faults_test.ts under a low `ulimit -n`: a userspace proxier serving one
 * NodePort on 127.0.0.1 to the backend port given; prints the NodePort, then serves until killed.
 */
import { ep, loopbackUserspaceProxier, makeEndpointSlice, makeService } from "../support/fixtures.ts";
import { freePort } from "../support/net_helpers.ts";

// As main.ts does at start: the signal driver opens its fds now, not under the fd limit later.
Deno.addSignalListener("SIGTERM", () => Deno.exit(0));
const backend = Number(Deno.args[0]);
const nodePort = freePort();
const p = loopbackUserspaceProxier();
p.syncLoop(new AbortController().signal);
p.onServicesSynced();
p.onEndpointSlicesSynced();
p.onServiceAdd(makeService("ns1", "svc1", (s) => {
  s.spec!.type = "NodePort";
  s.spec!.ports = [{ name: "p", port: 80, protocol: "TCP", nodePort }];
}));
p.onEndpointSliceAdd(makeEndpointSlice("ns1", "svc1", (s) => {
  s.ports = [{ name: "p", port: backend, protocol: "TCP" }];
  s.endpoints = [ep("127.0.0.1")];
}));
console.log(JSON.stringify({ nodePort }));
