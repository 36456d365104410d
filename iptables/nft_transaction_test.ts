import { assertEquals } from "../tests/support/assert.ts";
import { NftTransaction } from "./nft_transaction.ts";

const lines = (tx: NftTransaction) => tx.text().split("\n").filter((l) => l !== "");

Deno.test("NftTransaction.splitForNewTable: add element statements and the hooked chains' rules move out in order; the rest stays", () => {
  const tx = new NftTransaction("IPv6", "kube-proxy")
    .addTable()
    .addChain("in", { type: "filter", hook: "input", priority: "0" })
    .addChain("c")
    .addSet("map", "m", "type ipv6_addr : verdict;")
    .addElements("m", ["::1 : drop", "::2 : drop", "::3 : accept"], 2)
    .deleteElements("m", ["::9"])
    .addRule("c", "ip6 daddr vmap @m")
    .addRule("in", "jump c")
    .addElements("s", ["::4"])
    .addRule("in", "counter");
  assertEquals(tx.addedStatements, 3);
  const { parts, hooks } = tx.splitForNewTable(2);
  assertEquals(parts.map(lines), [
    [
      "add element ip6 kube-proxy m { ::1 : drop, ::2 : drop }",
      "add element ip6 kube-proxy m { ::3 : accept }",
    ],
    ["add element ip6 kube-proxy s { ::4 }"],
  ]);
  assertEquals(lines(hooks), ["add rule ip6 kube-proxy in jump c", "add rule ip6 kube-proxy in counter"]);
  assertEquals(lines(tx), [
    "add table ip6 kube-proxy",
    "add chain ip6 kube-proxy in { type filter hook input priority 0; policy accept; }",
    "add chain ip6 kube-proxy c",
    "add map ip6 kube-proxy m { type ipv6_addr : verdict; }",
    "delete element ip6 kube-proxy m { ::9 }",
    "add rule ip6 kube-proxy c ip6 daddr vmap @m",
  ]);
  assertEquals(tx.addedStatements, 0);
  // What is added after the split is counted, and split, anew.
  tx.addElements("s", ["::5"]).addRule("in", "accept");
  const again = tx.splitForNewTable(5);
  assertEquals(again.parts.map(lines), [["add element ip6 kube-proxy s { ::5 }"]]);
  assertEquals(lines(again.hooks), ["add rule ip6 kube-proxy in accept"]);
  assertEquals(lines(tx).length, 6);
});

Deno.test("NftTransaction.clear and append: a cleared transaction writes nothing of before; an appended one's elements and hooked chains' rules split out as if written here", () => {
  const base = new NftTransaction("IPv4", "t").addTable().addChain("in", {
    type: "filter",
    hook: "input",
    priority: "0",
  });
  assertEquals(base.clear().text(), "");
  // The cleared transaction still knows `in` is hooked: its rules are held back by a split.
  base.addRule("in", "accept");
  const more = new NftTransaction("IPv4", "t").addSet("set", "s", "type ipv4_addr;").addElements("s", [
    "10.0.0.1",
  ]);
  base.append(more).addElements("s", ["10.0.0.2"]);
  assertEquals(base.addedStatements, 2);
  const { parts, hooks } = base.splitForNewTable(1);
  assertEquals(parts.map((p) => p.text()), [
    "add element ip t s { 10.0.0.1 }\n",
    "add element ip t s { 10.0.0.2 }\n",
  ]);
  assertEquals(hooks.text(), "add rule ip t in accept\n");
  assertEquals(base.text(), "add set ip t s { type ipv4_addr; }\n");
});
