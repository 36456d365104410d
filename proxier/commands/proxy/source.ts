/**
 * The proxy's third phase: the source of objects over the provider. The API's lists are requested
 * as soon as the source is opened (before the mode's provider is built, so both proceed together);
 * a file source's objects are read when it runs.
 * @module
 */
import type { ModeProvider } from "../../mode_definition.ts";
import { FileSource } from "../../sources/file.ts";
import { startApiSource } from "../../sources/api_source.ts";
import type { ProxyServer } from "./build.ts";
import { proxyFailure } from "./proxy_failure.ts";

/** The configured source, opened. */
export interface ProxySource {
  /**
   * Feeds `handler` the source's objects, then their changes; resolves once the first objects are
   * handed over (a file source's) or requested (the API's), with the watch, which ends when `signal`
   * does.
   * @throws {CommandFailure} for a file source that cannot be read.
   */
  start(handler: ModeProvider, signal: AbortSignal): Promise<{ readonly watching: Promise<void> }>;
}

/** Opens the configured source: for the API, its first lists are requested now. */
export function openSource(s: ProxyServer): ProxySource {
  const { config, log } = s.c;
  const { nodeName } = s;
  if (config.source.kind === "file") {
    const { path } = config.source;
    return {
      async start(handler, signal) {
        const broken = s.metrics.sourceFileErrors();
        const src = new FileSource({
          path,
          nodeName,
          handler,
          log,
          onBroken: () => broken.inc(),
          // The node keeps serving what it served: readiness stays; the reason is said where operators look.
          onKept: (k) =>
            s.deps.health.setCondition(
              "source",
              k &&
                {
                  message: `changes refused since ${k.since.toISOString()}: ${k.reason}`,
                  blocksReadiness: false,
                },
            ),
        });
        try {
          await src.load();
        } catch (e) {
          throw proxyFailure("Cannot read --source", { path, error: (e as Error).message }, e);
        }
        return { watching: src.watch(signal) };
      },
    };
  }
  const access = s.access!;
  const api = s.api!;
  const kubernetes = startApiSource(access, api, config.clientConnection, { nodeName, log });
  return {
    async start(handler, signal) {
      const k = await kubernetes;
      const src = new k.KubernetesSource({
        access,
        api,
        prefetched: k.prefetched,
        nodeName,
        handler,
        log,
        clock: s.clock,
      });
      return { watching: src.run(signal) };
    },
  };
}
