import { assertEquals } from "../../tests/support/assert.ts";
import { endpointChainName, servicePortChainName } from "./chain_name.ts";

Deno.test("chain names match upstream kube-proxy's check vectors", () => {
  assertEquals(servicePortChainName("KUBE-SVC-", "ns1/svc1:p80", "TCP"), "KUBE-SVC-XPGD46QRK7WJZT7O");
  assertEquals(endpointChainName("ns1/svc1:p80", "tcp", "10.180.0.1:80"), "KUBE-SEP-SXIVWICOYRO3J4NJ");
});

Deno.test("chain names differ by prefix only for the same port, and are 25 characters at most", () => {
  const svc = servicePortChainName("KUBE-SVC-", "ns1/svc1:p80", "tcp");
  const ext = servicePortChainName("KUBE-EXT-", "ns1/svc1:p80", "tcp");
  assertEquals(svc.slice(9), ext.slice(9));
  assertEquals(servicePortChainName("KUBE-SVL-", "a/b", "udp").length, 25);
  assertEquals(servicePortChainName("KUBE-FW-", "a/b", "udp").length, 24);
});
