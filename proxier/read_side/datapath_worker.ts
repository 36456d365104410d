/**
 * The worker that answers a running proxy's `/debug/services` datapath checks off its event loop:
 * it reads the live rules once (each tool line through a `MemoExecutor`, with the tools the
 * permission set names), traces each connection of one report through them, and posts the results.
 * Parsing a large table costs seconds of CPU that syncs, `/healthz` and signals never wait for; the
 * proxy ends the worker when its answer is late or the program stops (`datapath_workers.ts`).
 * @module
 */
/// <reference lib="deno.worker" />
import { DenoExecutor } from "../../iptables/executor.ts";
import { MemoExecutor } from "../../iptables/memo_executor.ts";
import { MODES } from "../modes.ts";
import type { TraceResult } from "../trace/packet.ts";
import type { DatapathJob, DatapathJobAnswer } from "./datapath_workers.ts";

self.onmessage = async (e: MessageEvent<DatapathJob>) => {
  const job = e.data;
  let answer: DatapathJobAnswer;
  try {
    const tracer = MODES.get(job.mode);
    if (tracer?.trace === undefined) throw new Error(`mode ${job.mode} has no tracer`);
    const exec = new MemoExecutor(new DenoExecutor({ timeoutMs: job.toolTimeoutMs }));
    const results: TraceResult[] = [];
    for (const { query, nodeIPs } of job.queries) {
      results.push(await tracer.trace(query, { exec, config: job.config, nodeIPs }));
    }
    answer = { results };
  } catch (err) {
    answer = { error: err instanceof Error ? err.message : String(err) };
  }
  self.postMessage(answer);
};
