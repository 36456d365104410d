/**
 * The worker that lists EndpointSlices off the main thread (`list_on_worker.ts`): it fetches the
 * request it is given with the client's server, credentials and TLS, parses the body a batch at a
 * time and posts each batch as rows (`slice_rows.ts`), then the list's envelope, or how it failed.
 * @module
 */
/// <reference lib="deno.worker" />
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { causeMessages } from "../runtime/errors.ts";
import { slim } from "./api_client.ts";
import { apiHttpClient } from "./api_http_client.ts";
import { ListSplitter } from "./list_stream.ts";
import type { WorkerListAnswer, WorkerListJob } from "./list_on_worker.ts";
import { sliceRow } from "./slice_rows.ts";

const post = (a: WorkerListAnswer) => self.postMessage(a);

self.onmessage = async (e: MessageEvent<WorkerListJob>) => {
  const job = e.data;
  let client: Deno.HttpClient | undefined;
  try {
    client = apiHttpClient(job.tls, job.proxyURL);
    const res = await fetch(job.url, { headers: job.headers, client });
    if (res.status !== 200) {
      await res.body?.cancel();
      post({ status: res.status, statusText: res.statusText });
      return;
    }
    const splitter = new ListSplitter<V1EndpointSlice>((batch) => {
      post({ rows: batch.map((s) => sliceRow(slim(s), job.nodeName)) });
    }, job.batchBytes);
    for await (const chunk of res.body ?? []) splitter.push(chunk);
    post({ envelope: splitter.finish() });
  } catch (err) {
    // The causes too: a failed fetch says why (a refused connection, an untrusted certificate) only there.
    post({ error: { name: err instanceof Error ? err.name : "Error", messages: causeMessages(err) } });
  } finally {
    client?.close();
  }
};
