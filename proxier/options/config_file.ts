/**
 * Decoding a `kubeproxy.config.k8s.io/v1alpha1` KubeProxyConfiguration file as upstream does: YAML
 * or JSON into the typed fields (a value of the wrong type is an error naming the field), strictly
 * first; a field upstream does not know is then one warning naming it and the rest of the file is
 * used, as upstream's lenient fallback does.
 * @module
 */
import { loadBounded, YamlInputError } from "../runtime/bounded_yaml.ts";
import { UsageError } from "../runtime/errors.ts";
import { parseDuration } from "./duration.ts";
import {
  API_VERSION,
  type FieldType,
  KIND,
  type KubeProxyConfiguration,
  newKubeProxyConfiguration,
  QUANTITY,
  SCHEMA,
  type Schema,
  zeroOf,
} from "./kube_proxy_configuration.ts";

/** A decoded file: its fields (not yet defaulted) and the unknown fields it named. */
export interface DecodedConfigFile {
  readonly config: KubeProxyConfiguration;
  /** One line per unknown field, to log once at start. */
  readonly warnings: string[];
}

/**
 * Decodes `text` (the file at `path`). Unknown fields become warnings; everything else that does
 * not decode is a {@linkcode UsageError} naming the file and the field.
 */
export function decodeConfigFile(text: string, path: string): DecodedConfigFile {
  const fail = (msg: string, cause?: unknown) => new UsageError(`--config: ${path}: ${msg}`, { cause });
  let doc: unknown;
  try {
    doc = loadBounded(text);
  } catch (e) {
    if (!(e instanceof YamlInputError)) throw e;
    throw new UsageError(`--config: ${path}${e.line === undefined ? "" : `:${e.line}`}: ${e.reason}`, {
      cause: e,
    });
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw fail("not a mapping");
  const d = doc as Record<string, unknown>;
  if (d.kind !== KIND || d.apiVersion !== API_VERSION) {
    throw fail(
      `want kind ${KIND}, apiVersion ${API_VERSION} (got kind ${JSON.stringify(d.kind)}, ` +
        `apiVersion ${JSON.stringify(d.apiVersion)})`,
    );
  }
  const unknown: string[] = [];
  const rest = Object.fromEntries(Object.entries(d).filter(([k]) => k !== "kind" && k !== "apiVersion"));
  const config = newKubeProxyConfiguration();
  Object.assign(config, decodeObject(SCHEMA, rest, "", unknown, fail));
  return {
    config,
    warnings: unknown.map((f) =>
      `--config: ${path}: unknown field "${f}" (not a field of ${KIND} ${API_VERSION}); ignored, ` +
      `as upstream's lenient decoding does`
    ),
  };
}

type Fail = (msg: string, cause?: unknown) => UsageError;

function decodeObject(
  schema: Schema,
  value: Record<string, unknown>,
  prefix: string,
  unknown: string[],
  fail: Fail,
): Record<string, unknown> {
  const out = zeroOf(schema) as Record<string, unknown>;
  for (const [k, v] of Object.entries(value)) {
    const t = schema[k];
    if (t === undefined) {
      unknown.push(prefix + k);
      continue;
    }
    out[k] = decodeValue(t, v, prefix + k, unknown, fail);
  }
  return out;
}

/** Decodes one value as Go's JSON decoding would into `t`; null leaves the zero value. */
function decodeValue(t: FieldType, v: unknown, field: string, unknown: string[], fail: Fail): unknown {
  if (v === null || v === undefined) return zeroOf(t);
  const want = (what: string) => fail(`${field}: want ${what}, got ${JSON.stringify(v)}`);
  if (typeof t === "object") {
    if (typeof v !== "object" || Array.isArray(v)) throw want("a mapping");
    return decodeObject(t, v as Record<string, unknown>, `${field}.`, unknown, fail);
  }
  switch (t) {
    case "string":
      if (typeof v !== "string") throw want("a string");
      return v;
    case "bool":
    case "bool?":
      if (typeof v !== "boolean") throw want("true or false");
      return v;
    case "int32":
    case "int32?":
      if (typeof v !== "number" || !Number.isInteger(v) || Math.abs(v) > 2 ** 31) throw want("an integer");
      return v;
    case "float":
      if (typeof v !== "number") throw want("a number");
      return v;
    case "duration":
    case "duration?":
      return duration(v, field, fail);
    case "flushFrequency":
      // component-base's TimeOrMetaDuration: a duration string, or an integer of nanoseconds.
      if (typeof v === "number" && Number.isInteger(v)) return v / 1e6;
      return duration(v, field, fail);
    case "quantity":
      if ((typeof v !== "string" && typeof v !== "number") || !QUANTITY.test(String(v))) {
        throw want('a quantity such as "0" or "10Mi"');
      }
      return String(v);
    case "strings?":
      if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) throw want("a list of strings");
      return [...v];
    case "boolMap":
      if (typeof v !== "object" || Array.isArray(v) || Object.values(v).some((x) => typeof x !== "boolean")) {
        throw want("a mapping of names to true or false");
      }
      return { ...v };
    case "vmodule?":
      if (
        !Array.isArray(v) ||
        v.some((e) =>
          typeof e?.filePattern !== "string" || !Number.isInteger(e?.verbosity) || e.verbosity < 0
        )
      ) {
        throw want("a list of {filePattern, verbosity}");
      }
      return v.map((e) => ({ filePattern: e.filePattern, verbosity: e.verbosity }));
  }
}

function duration(v: unknown, field: string, fail: Fail): number {
  if (typeof v !== "string") {
    throw fail(`${field}: want a duration string such as "30s", got ${JSON.stringify(v)}`);
  }
  const ms = parseDuration(v);
  if (ms === undefined) throw fail(`${field}: invalid duration ${JSON.stringify(v)} (e.g. 1s, 500ms, 1m30s)`);
  return ms;
}
