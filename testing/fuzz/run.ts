/**
 * Runs one fuzz property per route against the fuzz stack and prints what replays it. The defaults
 * suit CI (1,000 cases per route, a fresh seed each run); a longer or replayed run is one flag away:
 *   FUZZ_RUNS=100000 FUZZ_SEED=1234 FUZZ_ONLY="POST transfers" npx vitest run origin/fuzz.int.test.ts
 * (FUZZ_ONLY takes several route names separated by commas.)
 */

import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { send, type TestResponse } from "../http.ts";
import type { FuzzStack, StateSnapshot } from "./fuzz-stack.ts";
import { answerProblem, isRefusal, pendingStatusUrl } from "./refusals.ts";
import { type FuzzRequest, fuzzRequests } from "./requests.ts";
import type { FuzzRoute } from "./routes.ts";

/** `only`: the routes to fuzz (FUZZ_ONLY, names separated by commas); undefined: all. */
export type FuzzSettings = { runs: number; seed: number; only: string[] | undefined };

export function fuzzSettings(env: Record<string, string | undefined> = process.env): FuzzSettings {
  const runs = env.FUZZ_RUNS ? Number(env.FUZZ_RUNS) : 1_000;
  const seed = env.FUZZ_SEED ? Number(env.FUZZ_SEED) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  if (!Number.isInteger(runs) || runs < 1) throw new Error("FUZZ_RUNS must be a positive integer");
  if (!Number.isInteger(seed)) throw new Error("FUZZ_SEED must be an integer");
  const only = env.FUZZ_ONLY?.split(",")
    .map((name) => name.trim())
    .filter(Boolean);
  return { runs, seed, only: only?.length ? only : undefined };
}

export type FuzzOutcome = { cases: number; statuses: Record<number, number> };

/** Requests sent at once per property run: the origin answers them concurrently, as in production. */
const BATCH = 8;

/** The share of a route's cases the gateway's rate limits may answer before the run fails. */
const MAX_RATE_LIMITED_SHARE = 0.05;

/**
 * Sends each case and holds the four properties: no 5xx beyond the spec's, every refusal in the
 * route's wire format, a refusal (or any answer of a read route) changes no state (rows, the
 * settler's transactions on chain), and the origin process still answers. Cases go in batches of BATCH
 * concurrent requests, with the state read before and after each batch; a batch in which a write route
 * succeeded is not state-checked (its success may change state). Throws fast-check's report (seed, path,
 * shrunk case) on a failure.
 */
export async function fuzzRoute(
  stack: FuzzStack,
  route: FuzzRoute,
  settings: FuzzSettings,
): Promise<FuzzOutcome> {
  const ctx = { secrets: stack.secrets, agents: stack.agents, readOnly: stack.readOnly };
  const statuses: Record<number, number> = {};
  let cases = 0;
  let rateLimited = 0;
  process.stdout.write(
    `[fuzz] ${route.name}: ${settings.runs} cases, seed ${settings.seed} ` +
      `(replay: FUZZ_SEED=${settings.seed} FUZZ_RUNS=${settings.runs} FUZZ_ONLY="${route.name}")\n`,
  );
  const requests = fuzzRequests(route, ctx);
  // The state read after the last batch checked, which is the next batch's state before (nothing
  // else writes between two batches): a checked batch costs one read of the state, not two.
  let known: StateSnapshot | undefined;
  await fc.assert(
    fc.asyncProperty(fc.array(requests, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
      const before = known ?? (await stack.snapshot());
      known = undefined;
      const responses = await Promise.all(batch.map((request) => deliver(stack, route, request)));
      cases += batch.length;
      for (const [index, response] of responses.entries()) {
        if (response === "closed") {
          if (!(await stack.answers())) throw new Error("the origin stopped answering");
          continue;
        }
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
        if (errorCode(response.body) === "rate_limited") rateLimited += 1;
        const problem =
          answerProblem(route, response, batch[index]) ?? (await pendingProblem(route, response));
        if (problem) throw new Error(`case ${index}: ${problem}`);
      }
      const { changed, after } = await changedState(stack, before, route, responses);
      if (changed) throw new Error(`state changed by refusals: ${changed}`);
      known = after;
    }),
    { numRuns: Math.ceil(settings.runs / BATCH), seed: settings.seed, endOnFailure: true },
  );
  if (!(await stack.answers())) throw new Error(`the origin stopped answering after ${route.name}`);
  process.stdout.write(`[fuzz] ${route.name}: ${cases} cases sent, statuses ${JSON.stringify(statuses)}\n`);
  // A case the rate limiter answers never reaches the route: past a few, the fuzz is testing the
  // limiter, and says so rather than pass having tried the route far fewer times than it claims.
  if (rateLimited > cases * MAX_RATE_LIMITED_SHARE)
    throw new Error(
      `${rateLimited} of ${cases} cases were answered rate_limited and never reached ${route.name}: ` +
        "the fuzz stack needs more agents (fuzz-stack.ts)",
    );
  return { cases, statuses };
}

/**
 * A payment answered as accepted but not yet mined (a chain or a signer slower than the receipt
 * wait) must have a settlement behind it: its status URL answers 200, never 404.
 */
async function pendingProblem(route: FuzzRoute, response: TestResponse): Promise<string | null> {
  const statusUrl = pendingStatusUrl(route, response);
  if (!statusUrl) return null;
  const status = await send(statusUrl, { method: "GET" });
  return status.status === 200
    ? null
    : `${response.status} settlement_pending, but its status URL answers ${status.status} ${JSON.stringify(status.body)}`;
}

/**
 * The answer, or "closed" when the origin cut the connection while an oversize body was still
 * being sent (it answered before reading it all; the client may see the reset first).
 */
async function deliver(
  stack: FuzzStack,
  route: FuzzRoute,
  request: FuzzRequest,
): Promise<TestResponse | "closed"> {
  try {
    return await send(`${stack.origin.base}${request.path}`, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      contentType: request.contentType,
      localAddress: request.localAddress,
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const size = request.body === undefined ? 0 : Buffer.byteLength(request.body as string);
    if ((code === "EPIPE" || code === "ECONNRESET") && size > (route.body?.maxBytes ?? 1_024))
      return "closed";
    throw error;
  }
}

/**
 * What changed that must not have, or null; with the state read after the batch, when the batch
 * was checked (every answer a refusal, or a read route).
 */
async function changedState(
  stack: FuzzStack,
  before: StateSnapshot,
  route: FuzzRoute,
  responses: (TestResponse | "closed")[],
): Promise<{ changed: string | null; after?: StateSnapshot }> {
  const refusals = responses.filter((response) => response === "closed" || isRefusal(route, response));
  if (refusals.length < responses.length && !route.readOnly) return { changed: null };
  const after = await stack.snapshot();
  const may = route.refusalMayRecord ?? [];
  const codes = new Set(
    refusals.map((response) => (response === "closed" ? undefined : errorCode(response.body))),
  );
  const growth = (key: keyof StateSnapshot): number => Number(after[key]) - Number(before[key]);
  const excused = new Set<keyof StateSnapshot>();
  // An admitted registration attempt counts even when issuance then refuses it.
  // Only refusals past admission (a quota or the key stock at issuance) may have counted one.
  const pastAdmission = refusals.filter(
    (response) =>
      response !== "closed" &&
      ["registration_unavailable", "registration_rate_limited"].includes(errorCode(response.body) ?? ""),
  ).length;
  if (may.includes("registration_attempt") && growth("registration_attempts") <= pastAdmission)
    excused.add("registration_attempts");
  // A money action refused after its claim is kept as `failed` with the refusal's code.
  if (may.includes("failed_action") && growth("actions") > 0 && growth("actions") <= refusals.length) {
    const newest = await stack.newestActions(growth("actions"));
    if (newest.every((action) => action.status === "failed" && codes.has(action.error_code ?? undefined)))
      excused.add("actions");
  }
  const moved: string[] = [];
  for (const key of Object.keys(before) as (keyof StateSnapshot)[]) {
    if (excused.has(key) || isDeepStrictEqual(before[key], after[key])) continue;
    moved.push(`${key} ${before[key]} → ${after[key]}`);
  }
  return { changed: moved.length ? moved.join(", ") : null, after };
}

function errorCode(body: unknown): string | undefined {
  const error = (body as { error?: { code?: unknown } } | null)?.error;
  return typeof error?.code === "string" ? error.code : undefined;
}
