/**
 * Query strings for the fuzz suite, from the parameters a route's descriptor declares
 * (origin/openapi/operation-types.ts `query`): each parameter absent, within its bounds, just past
 * them, of another type or hostile, on its own or as the one off among good ones; now and then
 * given twice, in array or object notation, beside one the route does not read, or with
 * percent-encoding that does not decode.
 */
import fc from "fast-check";
import type { Operation } from "../../origin/openapi/operations.ts";
import { hostileString } from "./hostile.ts";
import { matching } from "./zod-arbitrary.ts";

type QueryParameter = NonNullable<Operation["query"]>[number];

/**
 * Values for a parameter: `usual` ones (`known` ones, what its spec cannot say: a search's words, a
 * real id; else absent mostly, or in its spec) and `any`: those beside generated, past the spec and
 * hostile ones.
 */
function parameterValues(
  parameter: QueryParameter,
  known: fc.Arbitrary<string> | undefined,
): { usual: fc.Arbitrary<string | null>; any: fc.Arbitrary<string> } {
  const { schema } = parameter;
  const inSpec =
    schema.type === "integer"
      ? fc.integer({ min: schema.minimum, max: schema.maximum }).map(String)
      : schema.enum
        ? fc.constantFrom(...schema.enum)
        : schema.pattern
          ? matching(new RegExp(schema.pattern))
          : fc.string({ maxLength: 40 });
  const pastSpec =
    schema.type === "integer"
      ? fc.constantFrom(
          String(schema.minimum - 1),
          String(schema.maximum + 1),
          "-0",
          "1.5",
          "1e3",
          "0x10",
          " 5",
          "5 ",
          "+1",
          "٣",
          "NaN",
          "Infinity",
          "9".repeat(30),
        )
      : schema.enum
        ? fc.constantFrom(...schema.enum).map((value) => `${value.toUpperCase()} `)
        : fc.constantFrom("", " ", "x".repeat(300));
  const good = known ?? inSpec;
  return {
    usual: known ?? fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: inSpec }),
    any: fc.oneof(
      { weight: 4, arbitrary: good },
      { weight: 3, arbitrary: inSpec },
      { weight: 2, arbitrary: pastSpec },
      { weight: 2, arbitrary: hostileString },
      // A good value with a NUL after it: what a database's text type refuses outright.
      { weight: 1, arbitrary: good.map((value) => `${value}\u0000`) },
    ),
  };
}

const encode = (name: string, value: string) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`;

/**
 * `?…` for the declared parameters, or "" (most cases carry one: a route's query is the part of
 * it a generated body never reaches). `known` maps a parameter's name to values from the stack.
 */
export function queryStrings(
  parameters: readonly QueryParameter[],
  known: Record<string, fc.Arbitrary<string>> = {},
): fc.Arbitrary<string> {
  const values = parameters.map((parameter) => parameterValues(parameter, known[parameter.name]));
  const pair = (index: number, value: string | null) =>
    value === null ? [] : [encode(parameters[index]!.name, value)];
  // Every parameter drawn on its own; or all as usual but one, so that one reaches the route (a
  // route with five filters refuses, or answers without a query, nearly every case otherwise).
  const independent = fc.tuple(...values.map(({ any }) => fc.option(any, { freq: 3 })));
  const oneOff = fc
    .tuple(
      fc.tuple(...values.map(({ usual }) => usual)),
      fc
        .nat({ max: values.length - 1 })
        .chain((index) => values[index]!.any.map((value) => ({ index, value }))),
    )
    .map(([chosen, off]) => chosen.map((value, index) => (index === off.index ? off.value : value)));
  const pairs = (values.length === 0 ? fc.constant([]) : fc.oneof(independent, oneOff)).map((chosen) =>
    chosen.flatMap((value, index) => pair(index, value)),
  );
  const names = parameters.map((parameter) => parameter.name);
  const oddPair = fc.oneof(
    // The same name twice, or in the array and object notations other frameworks read.
    fc
      .tuple(fc.constantFrom(...names), fc.string({ maxLength: 10 }))
      .map(([name, value]) => encode(name, value)),
    fc
      .tuple(fc.constantFrom(...names), fc.constantFrom("[]", "[0]", "[a]"))
      .map(([name, suffix]) => `${name}${suffix}=1`),
    // Names the route does not read.
    fc.constantFrom("__proto__=1", "constructor[prototype]=1", "toString=1", "unknown=1", "=", "&", "a"),
    // Escapes that do not decode, and raw characters a client should have escaped.
    fc.constantFrom(...names).map((name) => `${name}=%E0%A4%A`),
    fc.constantFrom(...names).map((name) => `${name}=%ZZ`),
    fc.constantFrom(...names).map((name) => `${name}=a+b%20c`),
    fc.constantFrom(...names).map((name) => `${name}=%00`),
  );
  return fc
    .tuple(
      pairs,
      fc.oneof(
        { weight: 3, arbitrary: fc.constant([]) },
        { weight: 1, arbitrary: fc.array(oddPair, { minLength: 1, maxLength: 2 }) },
      ),
      fc.boolean(),
    )
    .map(([declared, odd, oddFirst]) => {
      const all = oddFirst ? [...odd, ...declared] : [...declared, ...odd];
      return all.length === 0 ? "" : `?${all.join("&")}`;
    });
}
