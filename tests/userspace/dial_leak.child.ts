/**
 * Started by tests/userspace/faults_test.ts inside a network namespace of its own: times out
 * thousands of dials (SYNs dropped by an iptables rule in that namespace), lets them connect late,
 * and prints the process's open fd counts before, during and after.
 */
import { dialStaggered, DialTimeout } from "../../proxier/socket_proxy/dial.ts";

const n = Number(Deno.args[0] ?? "1000");
const port = 9999;
const l = Deno.listen({ hostname: "127.0.0.1", port });
(async () => {
  for await (const c of l) c.close();
})();
const fds = () => [...Deno.readDirSync("/proc/self/fd")].length;
const iptables = (op: string) =>
  new Deno.Command("iptables", {
    args: [op, "INPUT", "-p", "tcp", "--dport", String(port), "--syn", "-j", "DROP"],
  })
    .output();
const base = fds();
await iptables("-I");
let timeouts = 0;
await Promise.all(Array.from({ length: n }, () =>
  dialStaggered({
    pick: (tried) => tried.size === 0 ? `127.0.0.1:${port}` : undefined,
    staggerMs: [50],
    onFailure: (_, e) => {
      if (e instanceof DialTimeout) timeouts++;
    },
  })));
const during = fds();
await iptables("-D");
// Dropped SYNs are sent again after about a second: the dials connect late, and are closed.
let after = fds();
for (let i = 0; i < 100 && after > base + 2; i++) {
  await new Promise((r) => setTimeout(r, 100));
  after = fds();
}
console.log(JSON.stringify({ n, timeouts, base, during, after }));
l.close();
Deno.exit(0);
