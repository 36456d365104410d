import { assertEquals } from "../../../../tests/support/assert.ts";
import { webService, webSlice } from "../../../../tests/support/proxy_cluster.ts";
import type { ExplainReport, PortReport } from "../../../read_side/report.ts";
import { apiView, compareWithApi } from "./api_view.ts";

/** A node's report holding `endpoints` (ip -> ready) on the web Service's port, as `explain` shapes it. */
function held(endpoints: Record<string, boolean>, nodePort: number | null = 30500): ExplainReport {
  const port = {
    name: "http",
    protocol: "TCP",
    family: "IPv4",
    clusterIP: "172.30.5.10",
    port: 80,
    nodePort,
    endpoints: Object.entries(endpoints).map(([ip, ready]) => ({
      endpoint: `${ip}:8080`,
      ready,
      serving: ready,
      terminating: false,
      local: false,
      zoneHints: [],
      nodeHints: [],
    })),
  } as unknown as PortReport;
  return { ports: [port] } as unknown as ExplainReport;
}

Deno.test("api view: read as the proxy reads it; the same view agrees; each difference is named", () => {
  const slice = webSlice(["10.180.1.2", "10.180.3.2"], Date.parse("2026-01-01T00:00:00Z"));
  slice.endpoints![1].conditions = { ready: false, serving: false, terminating: true };
  slice.endpoints!.push({ addresses: ["not-an-ip"] });
  const view = apiView(webService(), [slice]);
  assertEquals(view.ports.map((p) => [p.name, p.port, p.nodePort, p.endpoints.length]), [[
    "http",
    80,
    30500,
    2,
  ]]);
  assertEquals(view.newestTriggerMs, Date.parse("2026-01-01T00:00:00Z"));
  assertEquals(view.warnings.length, 1, "the endpoint the proxy skips is skipped here too, and said");

  const same = held({ "10.180.1.2": true, "10.180.3.2": false });
  (same.ports[0].endpoints[1] as { terminating: boolean }).terminating = true;
  assertEquals(compareWithApi(same, view), { agrees: true, differences: [] });

  assertEquals(compareWithApi(held({ "10.180.1.2": false, "10.180.2.2": true }, 30999), view).differences, [
    "http 80/TCP IPv4: holds node port 30999; the API: 30500",
    "http 80/TCP IPv4: holds 10.180.1.2:8080 not ready; the API: ready",
    "http 80/TCP IPv4: lacks endpoint 10.180.3.2:8080 (not ready, terminating)",
    "http 80/TCP IPv4: holds endpoint 10.180.2.2:8080 (ready) the API removed",
  ]);
  assertEquals(compareWithApi({ ports: [] } as unknown as ExplainReport, view).differences, [
    "lacks port http 80/TCP IPv4",
  ]);
  assertEquals(apiView(webService(), [slice], "nope").ports, []);
});
