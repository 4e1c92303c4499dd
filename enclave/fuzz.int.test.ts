/**
 * The enclave's socket fuzzed as a compromised origin could drive it (docs/security.md): every op's
 * params generated from its own schema (shared/enclave-ops.ts), with the enclave's real keys woven
 * in and addresses the checksum passes, so requests reach the ops' checks; and, for the ops a
 * schema cannot reach past their first check, built in the shapes the origin sends
 * (./testing/fuzz-shapes.ts: real keys bound to their addresses, payers' signatures, operator
 * approvals, real backup envelopes and restore packages, P-256 keys), most typical and some with
 * one field at an edge. Then mutated (a field dropped, swapped for a hostile value, a prototype key
 * added). Privileged ops of the admin tier, whose authority the origin holds, carry a capability
 * minted for exactly those params; the other tiers' carry one minted with the admin key, which must
 * be refused, and the ops of OWN_TIER_OPS, in half their cases, one minted by their own tier's
 * authority, so that their own checks are fuzzed too; what the configure ops seal, the bounds of the
 * ops after them follow, and the world's terms are sealed again after their cases.
 *
 * Properties: every request is answered once, under its id, in the response schema; a refusal has
 * a code of the closed list and is never the answer dispatch gives an exception it did not expect
 * (seal_failed "internal error", logged "op failed"); every success is within the bounds the
 * enclave claims, read off what it signed (./testing/fuzz-bounds.ts: limits, the faucet's terms,
 * the settler's, fillers, the payee's, operator approvals); the process serves a plain request
 * after every batch. FUZZ_RUNS and FUZZ_SEED as for the origin's fuzz (testing/fuzz/run.ts); the
 * privileged ops get a quarter of the cases. Each op prints its outcomes.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENCLAVE_OP_SCHEMAS } from "../shared/enclave-ops.ts";
import {
  ENCLAVE_ERROR_CODES,
  type EnclaveResponse,
  PRIVILEGED_OP_SCOPE,
  type PrivilegedOp,
  responseSchema,
} from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { anyJson, hostileString, objectsOf, withOneValue, withoutOneKey } from "../testing/fuzz/hostile.ts";
import { fuzzSettings } from "../testing/fuzz/run.ts";
import { arbitraryFromSchema } from "../testing/fuzz/zod-arbitrary.ts";
import { mintFor } from "./testing/capabilities.ts";
import { SignedBounds } from "./testing/fuzz-bounds.ts";
import { openRecoverySession } from "./testing/fuzz-recovery.ts";
import { FuzzShapes, withValidAddresses } from "./testing/fuzz-shapes.ts";
import { type FuzzWorld, setUpFuzzWorld, worldTerms } from "./testing/fuzz-world.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

const settings = fuzzSettings();
const BATCH = 8;
type EnclaveOpName = keyof typeof ENCLAVE_OP_SCHEMAS;
const OPS = Object.keys(ENCLAVE_OP_SCHEMAS) as EnclaveOpName[];
const isPrivileged = (op: string): op is PrivilegedOp => op in PRIVILEGED_OP_SCOPE;
/**
 * Ops that change the sealed terms every later op is held to, while the later ops' shapes are the
 * world's: each one's cases end with the world's terms sealed again (worldTerms).
 */
const CONFIGURE_OPS: ReadonlySet<string> = new Set<PrivilegedOp>([
  "configure_policy",
  "configure_treasury",
  "configure_settler",
  "configure_payee",
]);
/**
 * Ops of the policy and recovery tiers also sent under their own tier's capability, as an operator
 * holding that authority would: what they change the bounds follow.
 */
const OWN_TIER_OPS: ReadonlySet<string> = new Set<PrivilegedOp>([
  "enroll_operator_key",
  "enroll_operator_passkey",
  "restore_backup",
  "load_recovery_key",
  ...(CONFIGURE_OPS as ReadonlySet<PrivilegedOp>),
]);
/** Ops whose cases use a restore session, opened afresh before them (./testing/fuzz-recovery.ts). */
const SESSION_OPS: ReadonlySet<string> = new Set<EnclaveOpName>(["restore_backup", "load_recovery_key"]);

/** Fields whose generated values would make a case slow rather than hostile: a batch of 1,000 keys. */
const FIELD_OVERRIDES: Partial<Record<EnclaveOpName, Record<string, fc.Arbitrary<unknown>>>> = {
  generate_keys: { count: fc.integer({ min: 1, max: 3 }) },
};

/** A params object changed in one place, or left as generated. */
function mutated(params: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  const hostile = fc.oneof(
    anyJson,
    hostileString,
    fc.uint8Array({ maxLength: 64 }),
    fc.constantFrom(-1, 2 ** 53, Number.MAX_SAFE_INTEGER + 2, 1e308, "9".repeat(80), null),
  );
  const asObject = objectsOf(params);
  return fc.oneof(
    { weight: 4, arbitrary: params },
    { weight: 1, arbitrary: fc.tuple(asObject, fc.nat()).map(([value, pick]) => withoutOneKey(value, pick)) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(asObject, fc.nat(), hostile)
        .map(([value, pick, replacement]) => withOneValue(value, pick, replacement)),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(asObject, fc.constantFrom("__proto__", "constructor", "toString"), anyJson)
        .map(([value, key, extra]) => Object.assign(Object.create(null), value, { [key]: extra })),
    },
  );
}

/** `key_ref` fields given the enclave's real keys most of the time, wherever they stand. */
function withKnownKeys(value: unknown, pick: number, keyRefs: string[]): unknown {
  if (!value || typeof value !== "object" || value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.map((item, index) => withKnownKeys(item, pick + index, keyRefs));
  const out: Record<string, unknown> = Object.create(null);
  for (const [key, inner] of Object.entries(value)) {
    out[key] =
      key === "key_ref" && pick % 4 !== 0
        ? keyRefs[pick % keyRefs.length]
        : withKnownKeys(inner, pick + key.length, keyRefs);
  }
  return out;
}

/** The answer to request `id`, or what is wrong with it; counts its outcome (`ok`, or its code and detail). */
function checkedAnswer(
  op: string,
  id: number,
  answer: unknown,
  outcomes: Record<string, number>,
): EnclaveResponse | string {
  const parsed = responseSchema.safeParse(answer);
  if (!parsed.success) return `${op}: an answer outside the response schema: ${JSON.stringify(answer)}`;
  const response: EnclaveResponse = parsed.data;
  const outcome = response.ok ? "ok" : [response.error.code, response.error.detail].filter(Boolean).join(":");
  outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  if (response.id !== id) return `${op}: answered under id ${String(response.id)}, asked under ${id}`;
  if (response.ok) return response;
  const { code, reason } = response.error;
  if (!(ENCLAVE_ERROR_CODES as readonly string[]).includes(code)) return `${op}: unknown code ${code}`;
  if (code === "seal_failed" && reason === "internal error")
    return `${op}: an exception dispatch did not expect (seal_failed, internal error)`;
  return response;
}

describe("the enclave's socket, fuzzed (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let world: FuzzWorld;
  let shapes: FuzzShapes;
  let bounds: SignedBounds;
  let keyRefs: string[];
  let nextId = 1_000_000;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "fuzz" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    world = await setUpFuzzWorld(client, fixture);
    shapes = new FuzzShapes(world);
    bounds = new SignedBounds(world, shapes, async () => expectOk(await client.request("get_policy", {})));
    keyRefs = [...world.agents, world.treasury, world.settler, world.payee].map((key) => key.key_ref);
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  /**
   * Sends one request and checks its answer; a privileged one carries a capability minted for it,
   * by its own tier's authority if `ownTier`, else by one the origin holds.
   */
  const ask = async (
    op: EnclaveOpName,
    params: unknown,
    ownTier: boolean,
    outcomes: Record<string, number>,
  ): Promise<string | null> => {
    const id = nextId++;
    let cap: unknown;
    if (isPrivileged(op)) {
      const minted = await mintFor(client, fixture, op, params as Record<string, unknown>, {
        // The origin holds only the admin tier's key: the other tiers' ops get a capability it could mint.
        ...(PRIVILEGED_OP_SCOPE[op] === "admin" || ownTier ? {} : { secret: fixture.adminSecret }),
      }).catch(() => undefined);
      cap = minted ?? { forged: true };
    }
    client.send({ v: 1, id, op, params, ...(cap === undefined ? {} : { cap }) });
    const answer = checkedAnswer(op, id, await client.next(), outcomes);
    if (typeof answer === "string") return answer;
    if (!answer.ok) return null;
    const result = answer.result as Record<string, unknown>;
    return bounds.broken(op, params as Record<string, unknown>, result, ownTier);
  };

  for (const op of OPS) {
    it(`${op}: every request answered under its id, refusals of the closed list, no unexpected exception, every success within its bounds, still serving`, async () => {
      const schema = ENCLAVE_OP_SCHEMAS[op].params;
      const generated = arbitraryFromSchema(schema).chain((value) =>
        value && typeof value === "object" && !Array.isArray(value) && FIELD_OVERRIDES[op]
          ? fc.record(FIELD_OVERRIDES[op]!).map((overrides) => ({ ...value, ...overrides }))
          : fc.constant(value),
      );
      const withKeys = fc
        .tuple(generated, fc.nat())
        .map(([value, pick]) => withKnownKeys(withValidAddresses(value), pick, keyRefs));
      if (SESSION_OPS.has(op))
        world.recovery = await openRecoverySession(client, fixture, [world.backup, world.donor]);
      const shaped = shapes.of(op);
      const params = mutated(
        shaped ? fc.oneof({ weight: 3, arbitrary: shaped }, { weight: 1, arbitrary: withKeys }) : withKeys,
      );
      const cases = fc.tuple(params, OWN_TIER_OPS.has(op) ? fc.boolean() : fc.constant(false));
      const runs = Math.ceil((isPrivileged(op) ? settings.runs / 4 : settings.runs) / BATCH);
      const outcomes: Record<string, number> = {};
      await fc.assert(
        fc.asyncProperty(fc.array(cases, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
          for (const [index, [value, ownTier]] of batch.entries()) {
            const problem = await ask(op, value, ownTier, outcomes);
            if (problem) throw new Error(`case ${index}: ${problem}`);
          }
          // Still serving: a plain question about a real key.
          expectOk(await client.request("public_identity", { key_ref: keyRefs[0]! }));
        }),
        { numRuns: runs, seed: settings.seed, endOnFailure: true },
      );
      if (CONFIGURE_OPS.has(op)) {
        const sealedAgain: Record<string, number> = {};
        for (const [configure, terms] of worldTerms(world))
          expect(await ask(configure, terms, true, sealedAgain)).toBeNull();
        expect(sealedAgain).toEqual({ ok: worldTerms(world).length });
      }
      process.stdout.write(
        `[enclave fuzz] ${op}: ${runs * BATCH} cases, seed ${settings.seed} (replay: FUZZ_SEED=${settings.seed} FUZZ_RUNS=${settings.runs}), outcomes ${JSON.stringify(outcomes)}\n`,
      );
      expect(fixture.stderr()).not.toContain('"op failed"');
    }, 600_000);
  }
});
