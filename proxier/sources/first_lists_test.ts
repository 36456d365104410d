import type { KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
import { assertEquals } from "../../tests/support/assert.ts";
import { type ApiClient, sourceQueries } from "./api_client.ts";
import { PrefetchedLists } from "./first_lists.ts";
import type { ItemSink } from "./reflector.ts";

const named = (name: string): KubernetesObject => ({ metadata: { name } });

/** A client whose lists the test drives: each one's sink, and its end. */
function drivenClient() {
  const lists = new Map<string, { sink?: ItemSink<KubernetesObject>; end: () => void }>();
  const api = {
    list(path: string, _query: unknown, sink?: ItemSink<KubernetesObject>) {
      return new Promise<KubernetesListObject<KubernetesObject>>((resolve) => {
        lists.set(path, { sink, end: () => resolve({ items: [], metadata: { resourceVersion: "5" } }) });
      });
    },
  } as unknown as ApiClient;
  return { api, lists };
}

Deno.test("prefetched lists: the batches parsed before an informer takes its list are held for it, the later ones go straight to it", async () => {
  const { api, lists } = drivenClient();
  const queries = sourceQueries("node-a");
  const prefetched = new PrefetchedLists(api, queries);
  const services = lists.get(queries.Service.path)!;
  services.sink!([named("a"), named("b")]);
  services.sink!([named("c")]);
  const got: string[] = [];
  const taken = prefetched.take("Service")!((items) => got.push(...items.map((o) => o.metadata!.name!)));
  assertEquals(got, ["a", "b", "c"], "what came before the informer, in order, as it takes the list");
  services.sink!([named("d")]);
  assertEquals(got, ["a", "b", "c", "d"]);
  services.end();
  assertEquals((await taken).metadata?.resourceVersion, "5");
  assertEquals(prefetched.take("Service"), undefined, "a list is handed over once");
  assertEquals(prefetched.held, 3);
});
