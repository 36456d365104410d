/**
 * The scenario list itself: every scenario's objects share one source directory on one node, so no
 * two may claim the same cluster IP or the same protocol and node port (the proxy would serve the
 * first and warn about the second, and the second scenario would test nothing).
 */
import { assertEquals } from "../support/assert.ts";
import type { Agent, Pod } from "./netns.ts";
import { type E2EEnv, SCENARIOS } from "./scenarios.ts";

Deno.test("e2e scenarios: no two claim the same cluster IP, or the same protocol and node port", () => {
  const pod = (ip: string) => ({ ns: "", ip, agent: {} as Agent }) as Pod;
  const env = {
    pods: [pod("10.180.1.2"), pod("10.180.2.2")],
    node2: pod("192.168.0.3"),
  } as unknown as E2EEnv;
  const owners = new Map<string, string[]>();
  const claim = (what: string, id: string) => owners.set(what, [...owners.get(what) ?? [], id]);
  for (const s of SCENARIOS) {
    const text = s.objects(env);
    for (const m of text.matchAll(/^ {2}clusterIP: (\S+)$/gm)) claim(`cluster IP ${m[1]}`, s.id);
    for (const m of text.matchAll(/protocol: (\w+), port: \d+, targetPort: \d+, nodePort: (\d+)/g)) {
      claim(`${m[1]} node port ${m[2]}`, s.id);
    }
  }
  assertEquals([...owners].filter(([, ids]) => ids.length > 1), []);
});
