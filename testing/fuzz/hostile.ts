/**
 * Hostile inputs for the fuzz suite: raw JSON texts that JSON.stringify cannot produce (duplicate
 * keys, lone surrogates, invalid UTF-8, deep nesting, huge numbers, prototype keys), mutations of
 * valid-ish bodies, and header values within what HTTP lets a client send.
 */
import fc from "fast-check";

/** A JSON value of any shape, with the awkward corners weighted in. */
export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 4 });

const hugeNumberText = fc.constantFrom(
  "1e400",
  "-1e400",
  "123456789012345678901234567890123456789012345678901234567890",
  "-0",
  "0.0000000000000000000000000001",
  "1E+308",
  "9007199254740993",
);

export const hostileString = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom(
    "\u0000",
    "\u202e",
    "\ufeff",
    "𝟘x" + "0".repeat(40),
    "０x1234",
    "0x" + "f".repeat(41),
    "__proto__",
    "constructor",
    "../../etc/passwd",
    "' or 1=1 --",
    "%00",
  ),
);

/** A JSON text, escaped as JSON.stringify would not write it: lone surrogates and \u escapes. */
const loneSurrogateText = fc
  .constantFrom("\\ud800", "\\udfff", "\\udbff\\u0041", "\\u0000", "\\uffff")
  .map((sequence) => `"${sequence}"`);

/** Prototype-polluting keys, as raw text (JSON.parse makes them own properties). */
const protoKeyText = fc
  .tuple(fc.constantFrom("__proto__", "constructor", "prototype", "toString", "hasOwnProperty"), anyJson)
  .map(([key, value]) => `{"${key}":${JSON.stringify(value)}}`);

/** Nesting far deeper than any schema, within the body limit of the route or past it. */
const deepText = (maxBytes: number) =>
  fc
    .tuple(fc.constantFrom("[", '{"a":'), fc.integer({ min: 1, max: Math.max(2, Math.floor(maxBytes / 5)) }))
    .map(([open, depth]) => open.repeat(depth) + "1" + (open === "[" ? "]" : "}").repeat(depth));

export type BodyBytes = string | Uint8Array;

/** Raw texts and bytes that no valid-ish generator would write. */
export function hostileBody(maxBytes: number): fc.Arbitrary<BodyBytes> {
  return fc.oneof(
    hugeNumberText,
    loneSurrogateText,
    protoKeyText,
    deepText(maxBytes),
    anyJson.map((value) => JSON.stringify(value) ?? "null"),
    fc.string({ unit: "binary", maxLength: 200 }),
    fc.uint8Array({ maxLength: 200 }),
    // Invalid UTF-8 inside a JSON string.
    fc.constant(Uint8Array.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0xff, 0x22, 0x7d])),
    fc.constantFrom("", " ", "{", "}", "[", "null", "true", "{}", "[]", '{"a":1,}', "{'a':1}", "\ufeff{}"),
    // Over the route's limit, by a little or by a lot.
    fc.integer({ min: maxBytes + 1, max: maxBytes * 4 }).map((size) => `{"pad":"${"x".repeat(size)}"}`),
  );
}

/** The objects among `valid`'s values (not arrays). */
export const objectsOf = (valid: fc.Arbitrary<unknown>): fc.Arbitrary<Record<string, unknown>> =>
  valid.filter(
    (value): value is Record<string, unknown> =>
      !!value && typeof value === "object" && !Array.isArray(value),
  );

/** `value` without one of its keys (the `pick`th, wrapping); an empty object as it is. */
export function withoutOneKey(value: Record<string, unknown>, pick: number): Record<string, unknown> {
  const keys = Object.keys(value);
  if (keys.length === 0) return value;
  const { [keys[pick % keys.length]!]: _dropped, ...rest } = value;
  return rest;
}

/** `value` with one of its keys' values (the `pick`th, wrapping) swapped; an empty object as it is. */
export function withOneValue(
  value: Record<string, unknown>,
  pick: number,
  replacement: unknown,
): Record<string, unknown> {
  const keys = Object.keys(value);
  return keys.length === 0 ? value : { ...value, [keys[pick % keys.length]!]: replacement };
}

/**
 * A valid-ish object changed in one place: a key dropped, an unknown or prototype key added, a
 * value swapped for a hostile one, a key written twice in the raw text (the last one wins in
 * JSON.parse, so the first can hide a value from a reader that takes the first), or a string given
 * a NUL.
 */
export function mutatedBody(valid: fc.Arbitrary<unknown>): fc.Arbitrary<BodyBytes> {
  const asObject = objectsOf(valid);
  const hostileValue = fc.oneof(anyJson, hostileString, hugeNumberText.map(Number), fc.constant(null));
  return fc.oneof(
    valid.map((value) => JSON.stringify(value)),
    fc.tuple(asObject, fc.nat()).map(([value, pick]) => JSON.stringify(withoutOneKey(value, pick))),
    fc
      .tuple(
        asObject,
        fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype"), fc.string()),
        anyJson,
      )
      .map(
        ([value, key, extra]) =>
          `${JSON.stringify(value).slice(0, -1)}${Object.keys(value).length ? "," : ""}${JSON.stringify(key)}:${JSON.stringify(extra)}}`,
      ),
    fc
      .tuple(asObject, fc.nat(), hostileValue)
      .map(([value, pick, replacement]) => JSON.stringify(withOneValue(value, pick, replacement))),
    fc.tuple(asObject, fc.nat(), hostileValue).map(([value, pick, first]) => {
      const keys = Object.keys(value);
      if (keys.length === 0) return JSON.stringify(value);
      const key = keys[pick % keys.length]!;
      return `{${JSON.stringify(key)}:${JSON.stringify(first) ?? "null"},${JSON.stringify(value).slice(1)}`;
    }),
    fc
      .tuple(asObject, fc.nat(), hostileValue, fc.boolean())
      .map(([value, pick, replacement, asProtoKey]) => nestedMutation(value, pick, replacement, asProtoKey)),
    fc
      .tuple(asObject, fc.nat(), fc.boolean())
      .map(([value, pick, alone]) => JSON.stringify(withNulInOneString(value, pick, alone))),
  );
}

/**
 * `value` with one of its strings, at any depth, given a NUL (after it, or alone): valid to every
 * schema that does not forbid control characters, and refused outright by a database's text and
 * JSON types, so a string that reaches a query unchecked shows as a 5xx.
 */
export function withNulInOneString(value: Record<string, unknown>, pick: number, alone: boolean): unknown {
  const paths = innerPaths(value).filter((path) => typeof valueAt(value, path) === "string");
  if (paths.length === 0) return value;
  const path = paths[pick % paths.length]!;
  const copy = structuredClone(value) as Record<string | number, unknown>;
  const parent = valueAt(copy, path.slice(0, -1)) as Record<string | number, unknown>;
  const key = path[path.length - 1]!;
  parent[key] = alone ? "\u0000" : `${parent[key] as string}\u0000`;
  return copy;
}

const valueAt = (value: unknown, path: (string | number)[]): unknown =>
  path.reduce<unknown>((node, key) => (node as Record<string | number, unknown>)[key], value);

/** The paths of every value inside `value` (objects' keys and arrays' indexes), outermost first. */
function innerPaths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (!value || typeof value !== "object") return [];
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((item, index) => [index, item])
    : Object.entries(value);
  return entries.flatMap(([key, inner]) => [[...prefix, key], ...innerPaths(inner, [...prefix, key])]);
}

const MARK = "\u0000fuzz-mark\u0000";

/**
 * One value deep inside a valid-ish object replaced (e.g. a payment's authorization.value made a
 * huge number), or, as raw text, a prototype key put first in the object that holds it.
 */
function nestedMutation(
  value: Record<string, unknown>,
  pick: number,
  replacement: unknown,
  asProtoKey: boolean,
): string {
  const paths = innerPaths(value);
  if (paths.length === 0) return JSON.stringify(value);
  const path = paths[pick % paths.length]!;
  const copy = structuredClone(value) as Record<string | number, unknown>;
  const at = (keys: (string | number)[]) => valueAt(copy, keys) as Record<string | number, unknown>;
  const parent = at(path.slice(0, -1));
  if (!asProtoKey || Array.isArray(parent)) {
    parent[path[path.length - 1]!] = replacement;
    return JSON.stringify(copy);
  }
  const key = JSON.stringify(["__proto__", "constructor", "prototype"][pick % 3]);
  const parentText = JSON.stringify(parent);
  const hostile = `{${key}:${JSON.stringify(replacement) ?? "null"}${parentText === "{}" ? "" : ","}${parentText.slice(1)}`;
  if (path.length === 1) return hostile;
  // The parent's slot holds a mark in the copy's text, which the hostile text then replaces.
  at(path.slice(0, -2))[path[path.length - 2]!] = MARK;
  return JSON.stringify(copy).replace(JSON.stringify(MARK), () => hostile);
}

/** Characters a client can put in a header value (HTTP field-value: visible ASCII, space, tab, obs-text). */
const headerChar = fc
  .oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
    { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
    { weight: 1, arbitrary: fc.constant(0x09) },
  )
  .map((code) => String.fromCharCode(code));

export const headerValue = (maxLength = 200): fc.Arbitrary<string> =>
  fc.string({ unit: headerChar, maxLength }).map((value) => value.trim());

/** Strings shaped like addresses, lists of them, and garbage, for the client-address headers. */
export const ipLike: fc.Arbitrary<string> = fc.oneof(
  fc.ipV4(),
  fc.ipV6(),
  fc.ipV4Extended(),
  fc.constantFrom(
    "127.0.0.1",
    "10.0.0.1",
    "192.168.1.1",
    "0.0.0.0",
    "255.255.255.255",
    "::1",
    "::",
    "::ffff:8.8.8.8",
    "::ffff:127.0.0.1",
    "64:ff9b::808:808",
    "fe80::1%eth0",
    "2001:db8::1",
    "[2001:4860::1]",
    "8.8.8.8:443",
    "1.1.1.1, 2.2.2.2",
    "unknown",
    "",
  ),
  headerValue(60),
);

export const forwardedFor: fc.Arbitrary<string> = fc
  .array(ipLike, { minLength: 1, maxLength: 6 })
  .map((hops) => hops.join(", "));
