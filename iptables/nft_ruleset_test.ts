import { assertEquals } from "../tests/support/assert.ts";
import { NftRuleset } from "./nft_ruleset.ts";
import { listingStatements, normalizeListing } from "./nft_listing.ts";

const TRANSACTION = `add table ip t
add chain ip t a
add chain ip t b { type filter hook input priority dstnat - 10; policy accept; }
add map ip t m { type ipv4_addr . inet_proto . inet_service : verdict; }
add set ip t s { type ipv4_addr; flags interval; }
add map ip t pins { type ipv4_addr : ipv4_addr . inet_service; flags dynamic,timeout; timeout 3h; }
add rule ip t b ip daddr . meta l4proto . th dport vmap @m
add rule ip t a ip saddr @s drop
add element ip t m { 10.0.0.1 . tcp . 80 comment "ns/a:p" : goto a, 10.0.0.2 . udp . 53 : goto a }
add element ip t s { 10.1.0.0/16 }
`;

Deno.test("listingStatements: an nft listing reads back into the same tables", () => {
  const r = new NftRuleset();
  r.apply(TRANSACTION);
  const listed = r.listTable("IPv4", "t");
  // nft wraps long element lists over lines: the reader joins them.
  const wrapped = listed.replace(", 10.0.0.2", ",\n\t\t\t     10.0.0.2");
  const back = new NftRuleset();
  back.apply(listingStatements(wrapped).join("\n"));
  assertEquals(normalizeListing(back.listTable("IPv4", "t")), normalizeListing(listed));
});
