/**
 * The nftables mode's `--cleanup` (and what a start of another mode removes): its table in the
 * family, in one transaction (the table holds every chain, map and set the mode wrote).
 * @module
 */
import type { Executor } from "../../iptables/executor.ts";
import { NftRunner } from "../../iptables/nft.ts";
import { NftTransaction } from "../../iptables/nft_transaction.ts";
import type { IPFamily } from "../model/types.ts";
import { TABLE } from "./layout.ts";

/** Deletes `family`'s table; returns what went, as `--cleanup` says it (nothing when there was none). */
export async function cleanupNftables(exec: Executor, family: IPFamily): Promise<string[]> {
  const nft = new NftRunner({ exec, family });
  const chains = await nft.listChains(TABLE).catch(() => undefined);
  await nft.apply(new NftTransaction(family, TABLE).deleteTable().text());
  return chains === undefined
    ? []
    : [`table ${family === "IPv4" ? "ip" : "ip6"} ${TABLE} (${chains.length} chains)`];
}
