/**
 * A list through the real client against the test API server, parsed a batch at a time: what its
 * sink receives, and what the list resolves with.
 */
import type { KubernetesObject, V1Service } from "@kubernetes/client-node";
import { ApiClient } from "../../proxier/sources/api_client.ts";
import { apiAccessTo, TestApiServer } from "../support/api_server.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { makeService } from "../support/fixtures.ts";

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

Deno.test("API list: a sink gets the items a batch at a time, in the list's order, each slimmed; the list resolves without them", async () => {
  const api = new TestApiServer();
  // 400 Services of about 1.5 KiB each: a body of several chunks and, at 16 KiB a batch, many batches.
  const names = Array.from({ length: 400 }, (_, i) => `svc-${String(i).padStart(3, "0")}`);
  for (const name of names) {
    api.apply(
      "services",
      makeService("ns", name, (s: V1Service) => {
        s.metadata!.managedFields = [{
          manager: "kubectl",
          operation: "Apply",
          fieldsV1: { pad: "x".repeat(700) },
        }];
        s.metadata!.annotations = { [LAST_APPLIED]: "y".repeat(700), kept: "yes" };
      }) as KubernetesObject,
    );
  }
  const url = api.start();
  try {
    const client = new ApiClient(await apiAccessTo(url), { parseBatchBytes: 16 * 1024 });
    const batches: KubernetesObject[][] = [];
    const list = await client.list<KubernetesObject>(
      "/api/v1/services",
      {},
      (items) => batches.push([...items]),
    );
    assert(batches.length >= 10, `${batches.length} batches of 16 KiB for a body of about 600 KiB`);
    const got = batches.flat();
    assertEquals(got.map((o) => o.metadata?.name), names);
    assert(got.every((o) => o.metadata?.managedFields === undefined), "managedFields dropped");
    assertEquals(
      got[0].metadata?.annotations,
      { kept: "yes" },
      "the last-applied annotation dropped, the rest kept",
    );
    assertEquals(list.items, [], "the items went to the sink");
    assertEquals(list.metadata?.resourceVersion, String(names.length + 1));
    // Without a sink, the same items come in the list.
    const whole = await client.list<KubernetesObject>("/api/v1/services");
    assertEquals(whole.items.map((o) => o.metadata?.name), names);
  } finally {
    await api.stop();
  }
});
