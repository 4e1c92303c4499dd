import type { Context } from "hono";
import type * as z from "zod";
import { MAX_JSON_DEPTH, nestsAtMost } from "../../shared/json-depth.ts";
import { AppError } from "../errors.ts";
import { bodyIncompleteError, readBodyLimited } from "./read-body.ts";

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads a JSON body of at most `maxBytes` and parses it with `schema` (parsed once at the boundary,
 * trusted after). A larger body is a 413 `payload_too_large`, refused before it is read in full;
 * one that does not arrive in time is a 408 `request_timeout` (read-body.ts); anything else, a body
 * nested deeper than MAX_JSON_DEPTH among it, is a 400 `validation_failed` whose message names
 * what to fix.
 */
export async function parseJsonBody<T>(c: Context, schema: z.ZodType<T>, maxBytes = 4_096): Promise<T> {
  return (await readJsonBody(c, schema, maxBytes)).data;
}

/**
 * parseJsonBody, also giving the body as JSON.parse left it: for a route that must pass on part of
 * what it was sent exactly as sent (a parsed object has the schema's key order, not the sender's).
 */
export async function readJsonBody<T>(
  c: Context,
  schema: z.ZodType<T>,
  maxBytes = 4_096,
): Promise<{ data: T; raw: unknown }> {
  const read = await readBodyLimited(c, maxBytes);
  if (!read.ok && read.error === "incomplete") throw bodyIncompleteError();
  if (!read.ok) throw new AppError("payload_too_large", `the body must be at most ${maxBytes} bytes`);
  let body: unknown;
  try {
    body = JSON.parse(UTF8.decode(read.value));
  } catch {
    throw new AppError("validation_failed", "the body must be a JSON object");
  }
  // Before the schema: its refinements measure parts of a body with JSON.stringify, which recurses.
  if (!nestsAtMost(body, MAX_JSON_DEPTH)) {
    throw new AppError("validation_failed", `the body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return { data: parseJsonValue(schema, body), raw: body };
}

/**
 * A body readJsonBody read (its `raw`), parsed with `schema` as readJsonBody parses it: for a route
 * that must look at what it was sent before judging its shape.
 */
export function parseJsonValue<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw new AppError("validation_failed", describeIssue(parsed.error.issues[0], body));
}

function describeIssue(issue: z.core.$ZodIssue | undefined, body: unknown): string {
  if (!issue) return "the body is not valid";
  const field = issue.path.map(String).join(".");
  if (issue.code === "invalid_type" && field && !isPresent(body, issue.path)) return `${field} is required`;
  if (issue.code === "invalid_type" && !field) return "the body must be a JSON object";
  // A discriminated union names its own field and the values it takes, and has no forms to compare.
  if (issue.code === "invalid_union" && issue.errors.length > 0) return describeUnion(issue, body);
  if (issue.code === "unrecognized_keys")
    return `unknown field${issue.keys.length > 1 ? "s" : ""}: ${issue.keys.join(", ")}`;
  // The schemas' own messages name their field.
  return field && !issue.message.includes(field) ? `${field}: ${issue.message}` : issue.message;
}

/**
 * A value that is none of a union's forms, which zod words as a bare "Invalid input" naming no
 * field. When the keys sent fit one form (`{"x402": {}}` of the policy check), that form's own
 * first problem is described; otherwise which keys (`{"transfer"}` or `{"x402"}`) or which types
 * (a boolean or a number) the field may be.
 */
function describeUnion(issue: z.core.$ZodIssueInvalidUnion, body: unknown): string {
  const at = issue.path;
  const what = at.length > 0 ? at.map(String).join(".") : "the body";
  const forms = issue.errors.map((issues) =>
    issues.map((nested) => ({ ...nested, path: [...at, ...nested.path] }) as z.core.$ZodIssue),
  );
  const fitting = forms.filter((issues) => issues.every((nested) => !misfits(nested, at, body)));
  if (fitting.length === 1 && fitting[0]![0]) return describeIssue(fitting[0]![0], body);
  const keys = forms.map(
    (issues) => issues.find((nested) => nested.path.length > at.length)?.path[at.length],
  );
  if (keys.every((key) => key !== undefined)) {
    return `${what} must hold exactly one of ${[...new Set(keys.map(String))].join(", ")}`;
  }
  const types = forms.map((issues) => (issues[0]?.code === "invalid_type" ? issues[0].expected : undefined));
  if (types.every((type) => type !== undefined)) {
    const named = [...new Set(types)].map((type) => (type === "object" ? "a JSON object" : `a ${type}`));
    return `${what} must be ${named.join(" or ")}`;
  }
  return `${what} is none of the forms it may take`;
}

/** Whether an issue of one of a union's forms (at `at`) says the value sent is not of that form at all. */
function misfits(issue: z.core.$ZodIssue, at: readonly PropertyKey[], body: unknown): boolean {
  if (issue.path.length === at.length) return true;
  return issue.path.length === at.length + 1 && issue.code === "invalid_type" && !isPresent(body, issue.path);
}

/**
 * Whether the body holds something (null included) at `path`. Zod 4 leaves the rejected input out
 * of its issues, so a field sent with the wrong type would otherwise read as missing.
 */
function isPresent(body: unknown, path: readonly PropertyKey[]): boolean {
  let at: unknown = body;
  for (const key of path) {
    if (typeof at !== "object" || at === null || !Object.hasOwn(at, key)) return false;
    at = (at as Record<PropertyKey, unknown>)[key];
  }
  return at !== undefined;
}
