/**
 * fast-check arbitraries generated from the routes' own zod schemas (zod v4), so fuzzed bodies
 * have the shape a route expects and reach its deep validation instead of stopping at "not an
 * object". Covers the schema kinds the wire schemas use; anything else is an error here, so a new
 * kind in a schema is noticed rather than silently fuzzed as `anything`.
 */
import fc from "fast-check";
import type * as z from "zod";

type Def = { type: string; [key: string]: unknown };
type Check = { check: string; [key: string]: unknown };

const defOf = (schema: unknown): Def => (schema as { _zod: { def: Def } })._zod.def;
const checksOf = (def: Def): Check[] =>
  ((def.checks as { _zod: { def: Check } }[] | undefined) ?? []).map((check) => check._zod.def);

/** Values the schema accepts, as far as its checks can be read (refinements are not: they stay hard). */
export function arbitraryFromSchema(schema: z.ZodType): fc.Arbitrary<unknown> {
  const def = defOf(schema);
  switch (def.type) {
    case "object": {
      const shape = def.shape as Record<string, z.ZodType>;
      const required: string[] = [];
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [key, value] of Object.entries(shape)) {
        const inner = defOf(value);
        record[key] = arbitraryFromSchema(inner.type === "optional" ? (inner.innerType as z.ZodType) : value);
        if (inner.type !== "optional") required.push(key);
      }
      return fc.record(record, { requiredKeys: required });
    }
    case "string":
      return stringArbitrary(def);
    case "number": {
      const checks = checksOf(def);
      const integer = checks.some((c) => c.check === "number_format" && /int/.test(String(c.format)));
      const min = checks.find((c) => c.check === "greater_than")?.value as number | undefined;
      const max = checks.find((c) => c.check === "less_than")?.value as number | undefined;
      return integer
        ? fc.integer({ min: min ?? Number.MIN_SAFE_INTEGER, max: max ?? Number.MAX_SAFE_INTEGER })
        : fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
    }
    case "boolean":
      return fc.boolean();
    case "unknown":
      return fc.jsonValue({ maxDepth: 3 });
    case "enum":
      return fc.constantFrom(...Object.values(def.entries as Record<string, string>));
    case "literal":
      return fc.constantFrom(...(def.values as unknown[]));
    case "union":
      return fc.oneof(...(def.options as z.ZodType[]).map(arbitraryFromSchema));
    case "record":
      return fc.dictionary(
        arbitraryFromSchema(def.keyType as z.ZodType) as fc.Arbitrary<string>,
        arbitraryFromSchema(def.valueType as z.ZodType),
        { maxKeys: 8 },
      );
    case "array":
      return fc.array(arbitraryFromSchema(def.element as z.ZodType), { maxLength: 8 });
    case "nullable":
      return fc.option(arbitraryFromSchema(def.innerType as z.ZodType), { nil: null });
    case "optional":
    case "default":
      return arbitraryFromSchema(def.innerType as z.ZodType);
    case "pipe":
      return arbitraryFromSchema(def.in as z.ZodType);
    case "custom":
      // The one custom kind of the wire schemas: bytes (the enclave's bytesSchema).
      return fc.uint8Array({ maxLength: 512 });
    default:
      throw new Error(`zod-arbitrary: schema kind '${def.type}' is not covered; add it`);
  }
}

function stringArbitrary(def: Def): fc.Arbitrary<string> {
  const checks = checksOf(def);
  const min = (checks.find((c) => c.check === "min_length")?.minimum as number | undefined) ?? 0;
  const max = checks.find((c) => c.check === "max_length")?.maximum as number | undefined;
  const pattern =
    (def.pattern as RegExp | undefined) ??
    (checks.find((c) => c.check === "string_format" && c.pattern)?.pattern as RegExp | undefined);
  // A pattern's repetitions come out short by default: a long minimum (hex of 37 bytes or more)
  // would leave the length filter below passing almost nothing, and the generator spinning.
  const base = pattern
    ? matching(pattern, min > 16 ? "large" : undefined)
    : fc.string({ unit: "grapheme", maxLength: max ?? 64 });
  return base.filter((value) => value.length >= min && (max === undefined || value.length <= max));
}

/**
 * Numerals at the edges of the integer types a value may end up in (a Postgres bigint and
 * integer, a JavaScript safe integer, an unsigned 64-bit): random digits seldom land there, and
 * a pattern of digits says nothing of a column's range.
 */
const BOUNDARY_NUMERALS = [
  "0",
  "2147483647",
  "2147483648",
  "4294967296",
  "9007199254740993",
  "9223372036854775807",
  "9223372036854775808",
  "18446744073709551616",
  "9999999999999999999",
];

/** Strings matching `pattern`, the boundary numerals that match it weighted in. */
export function matching(pattern: RegExp, size?: fc.SizeForArbitrary): fc.Arbitrary<string> {
  const boundaries = BOUNDARY_NUMERALS.filter((numeral) => pattern.test(numeral));
  const strings = fc.stringMatching(pattern, size === undefined ? {} : { size });
  return boundaries.length === 0
    ? strings
    : fc.oneof({ weight: 3, arbitrary: strings }, { weight: 1, arbitrary: fc.constantFrom(...boundaries) });
}
