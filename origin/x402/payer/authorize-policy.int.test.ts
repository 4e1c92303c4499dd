import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { type Address, type Hex, verifyTypedData } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../../devnet/testing.ts";
import { enrolledOperator, type Operator } from "../../../enclave/testing/agent-policy.ts";
import { mintFor } from "../../../enclave/testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "../../../enclave/testing/raw-client.ts";
import type { AgentPolicyDocument } from "../../../shared/agent-policy.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../../shared/eip712.ts";
import type { ActionView, X402AuthorizeResponse } from "../../../shared/gateway-schemas.ts";
import {
  agentPolicySubject,
  heldApprovalSubject,
  nodeFreezeSubject,
} from "../../../shared/operator-approval.ts";
import type { StackAgent } from "../../../testing/agent-factory.ts";
import { useMoneyStack, useStackOrigin } from "../../../testing/stack.ts";
import { SELLER_EXTRA, sellerQuote } from "../../../testing/x402-quote.ts";
import { queryRows } from "../../db/client.ts";
import { writeAgentPolicy, writeNodeFrozen } from "../../policy/store.ts";
import type { SignerClient } from "../../signer/types.ts";

// POST /agent/v1/x402/authorize under agents' spending policies, against the real stack (origin,
// enclave, devnet, Postgres), with the node's ceiling sealed (1 USDC to any payee, as `npm start`
// seals): one path pays many sellers, each refusal names its rule, budgets hold under
// concurrency on two origins over one database, holds wait for an operator's approval, and the
// check call answers what authorize then does without reserving anything.

const AMOUNT = 10_000n;
const PAIR = newAccount().address.toLowerCase() as Address;
const SELLER_A = newAccount().address.toLowerCase() as Address;
const SELLER_B = newAccount().address.toLowerCase() as Address;
const SELLER_C = newAccount().address.toLowerCase() as Address;
const CEILING = 1_000_000n;

/** A chain-77 quote paying `payTo` `amount` units, as a seller's 402 body carries it. */
const quote = (payTo: string, amount: bigint, url = `https://${payTo.slice(2, 8)}.seller.test/item`) =>
  sellerQuote({ payTo, amount, url, description: "an item", extra: SELLER_EXTRA });

const newNonce = (): Hex => `0x${randomBytes(32).toString("hex")}`;
const sleepUntil = (atMs: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, atMs - Date.now())));
/** Resolves once the clock has turned the second it reads now. */
const untilNextSecond = () => sleepUntil((Math.floor(Date.now() / 1000) + 1) * 1000 + 5);

/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

type Answer = { status: number; text: string; body: unknown };
const errorOf = (answer: Answer) =>
  (answer.body as { error: { code: string; rule?: string; remaining?: string; action_id?: string } }).error;

describe("x402 authorize under agents' spending policies (real stack)", { timeout: 120_000 }, () => {
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo: PAIR },
      policy: { x402MaxPerPaymentUnits: CEILING, x402Payees: null },
    },
    { timeoutMs: 180_000 },
  );
  /**
   * sign_x402_authorization requests that reached the enclave through either origin, by the wallet
   * they sign for: each test counts its own agent's, so that tests may run beside each other.
   */
  const signRequests = new Map<string, number>();
  const signRequestsOf = (agent: StackAgent): number => signRequests.get(agent.wallet.toLowerCase()) ?? 0;
  /**
   * The wallets whose hop to the enclave is held until the clock turns the next second: the
   * enclave reads its clock a few milliseconds after the origin read its own, and the second can
   * turn between the two.
   */
  const enclaveReadsNextSecond = new Set<string>();
  let counted: SignerClient;
  let enclave: RawEnclaveClient;
  let operator: Operator;
  beforeAll(async () => {
    counted = {
      ...stack.signer,
      signX402Authorization: async (params) => {
        const wallet = params.from.toLowerCase();
        signRequests.set(wallet, (signRequests.get(wallet) ?? 0) + 1);
        if (enclaveReadsNextSecond.has(wallet)) await untilNextSecond();
        return stack.signer.signX402Authorization(params);
      },
    };
    ({ client: enclave } = await RawEnclaveClient.connect(stack.enclave.socketPath));
    operator = await enrolledOperator(enclave, stack.enclave, "x402-test-operator");
  }, 180_000);
  afterAll(() => enclave?.close());
  const first = useStackOrigin("first origin", stack, () => ({ signer: counted }), { timeoutMs: 180_000 });
  const second = useStackOrigin("second origin", stack, () => ({ signer: counted }), { timeoutMs: 180_000 });

  const db = () => stack.db.handle.db;
  const authorize = async (base: string, token: string, body: unknown): Promise<Answer> => {
    const response = await fetch(`${base}/agent/v1/x402/authorize`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, text, body: JSON.parse(text) };
  };

  /**
   * Runs `steps` once the steps handed over before have ended. The raw enclave client takes one
   * request at a time, and the enclave takes each capability (mintFor reads the next counter) and
   * each operator approval only above the last one it took: tests beside each other take turns.
   */
  let enclaveTurn: Promise<unknown> = Promise.resolve();
  const inTurn = <T>(steps: () => Promise<T>): Promise<T> => {
    const run = enclaveTurn.then(steps, steps);
    enclaveTurn = run.catch(() => {});
    return run;
  };

  /** The policy the enclave holds for the agent now, or null for none. */
  const sealedPolicyOf = async (agent: StackAgent) =>
    expectOk(await enclave.request("get_agent_policy", { key_ref: agent.keyRef }))
      .policy as AgentPolicyDocument | null;
  /** Seals the agent's policy in the enclave (with an operator's approval: it may loosen) and stores it as the origin does. */
  const setPolicy = (agent: StackAgent, document: AgentPolicyDocument) =>
    inTurn(async () => {
      const params = {
        key_ref: agent.keyRef,
        policy: document,
        // Signed over the policy the enclave holds now, as the operator's tool signs it.
        operator: await operator.approve("set_agent_policy", agentPolicySubject(agent.keyRef, document), {
          policyBefore: agentPolicySubject(agent.keyRef, await sealedPolicyOf(agent)),
        }),
      };
      const sealed = expectOk(
        await enclave.request(
          "set_agent_policy",
          params,
          await mintFor(enclave, stack.enclave, "set_agent_policy", params),
        ),
      );
      await writeAgentPolicy(db(), {
        agentId: agent.agentId,
        before: null,
        after: document,
        version: sealed.version as number,
        changedBy: { by: "operator", operatorKeyId: operator.keyId },
      });
    });

  /** Every budget row of the agent's day: what a check must leave as it is. */
  const budgets = async (agentId: string) =>
    queryRows<{ kind: string; pay_to: string | null; count: number | null; units: string }>(
      db(),
      sql`select 'day' as kind, null as pay_to, authorizations as count, units::text as units
            from x402_daily_authorizations where agent_id = ${agentId}
          union all
          select 'payee', pay_to, null, units::text from x402_daily_payee_units where agent_id = ${agentId}
          order by kind, pay_to`,
    );

  /** POST /agent/v1/policy/check with the quote: its answer, which must leave every budget as it was. */
  /**
   * An operator's approval of an agent's held authorization (by its nonce, payee and units): the
   * enclave's approve_held under the operator's signature, then the action's row, as `npm run
   * policy -- approve` marks it.
   */
  const approveHeld = (
    agent: StackAgent,
    held: { nonce: string; to: Address; units: bigint; actionId: string },
  ): Promise<void> =>
    inTurn(async () => {
      const { instance_id: instanceId } = expectOk(await enclave.request("get_sealed_identity", {})) as {
        instance_id: string;
      };
      const approvalExpiresAt = Math.floor(Date.now() / 1000) + 3600;
      const subject = {
        instanceId,
        keyRef: agent.keyRef,
        kind: "x402" as const,
        ref: held.nonce,
        to: held.to,
      };
      const params = {
        key_ref: agent.keyRef,
        kind: "x402",
        ref: held.nonce,
        to: held.to,
        value_units: held.units.toString(),
        expires_at: approvalExpiresAt,
        operator: await operator.approve(
          "approve_held",
          heldApprovalSubject({ ...subject, valueUnits: held.units }, approvalExpiresAt),
        ),
      };
      expectOk(
        await enclave.request(
          "approve_held",
          params,
          await mintFor(enclave, stack.enclave, "approve_held", params),
        ),
      );
      await db().execute(
        sql`update agent_actions set status = 'approved' where action_id = ${held.actionId}`,
      );
    });

  const check = async (agent: StackAgent, paymentRequired: unknown) => {
    const before = await budgets(agent.agentId);
    const response = await fetch(`${second.base}/agent/v1/policy/check`, {
      method: "POST",
      headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
      body: JSON.stringify({ x402: { payment_required: paymentRequired } }),
    });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as {
      decision: string;
      rule: string | null;
      remaining: string | null;
    };
    expect(await budgets(agent.agentId)).toEqual(before);
    return answer.decision === "allow" ? { decision: "allow" } : answer;
  };

  // The tests that wait out a quote's validity run beside each other and beside the block after
  // them (vitest runs adjacent concurrent blocks at once): each test has its own agent, and counts
  // only its agent's signatures. The 50 concurrent authorizations, the frozen node and the ceiling
  // sealed lower run in turn after them: the first loads the machine the margin tests time to the
  // second, the other two change what every agent's authorization meets.
  describe("waits for a quote's validity", BESIDE, () => {
    it("an approval that comes after the quote's validity signs nothing: the repeat answers the hold's ending", async () => {
      const agent = await stack.newAgent();
      await setPolicy(agent, { x402: { payees: [], unknown_payee: "hold" } });
      // A quote valid 7 s (the shortest authorize takes: a second past the validity margin): the
      // hold ends with it.
      const body = {
        payment_required: {
          ...quote(SELLER_A, 1_000n),
          accepts: [{ ...quote(SELLER_A, 1_000n).accepts[0]!, maxTimeoutSeconds: 7 }],
        },
        nonce: newNonce(),
      };
      const held = await authorize(first.base, agent.token, body);
      expect(held.status).toBe(202);
      await new Promise((resolve) => setTimeout(resolve, 8_100));
      // Approved now, its hold's row kept from the tracker's sweep (which would end it `expired`
      // first): the authorization's own validity is what must stop the signature.
      await db().execute(
        sql`update agent_actions set status = 'approved', hold_expires_at = now() + interval '1 hour'
            where action_id = ${(held.body as ActionView).action_id}`,
      );
      const signedBefore = signRequestsOf(agent);
      const late = await authorize(first.base, agent.token, body);
      expect(late.status).toBe(403);
      expect(errorOf(late)).toMatchObject({ code: "policy_denied", rule: "x402.unknown_payee" });
      expect(signRequestsOf(agent)).toBe(signedBefore);
    });

    it("an approval that comes in the quote's last margin seconds signs nothing: the repeat answers the hold's ending, not the enclave's refusal as x402_validity_too_long", async () => {
      const agent = await stack.newAgent();
      await setPolicy(agent, { x402: { payees: [], unknown_payee: "hold" } });
      // A quote valid 8 s: held now, its authorization ends 8 s from now.
      const body = {
        payment_required: {
          ...quote(SELLER_A, 1_000n),
          accepts: [{ ...quote(SELLER_A, 1_000n).accepts[0]!, maxTimeoutSeconds: 8 }],
        },
        nonce: newNonce(),
      };
      const held = await authorize(first.base, agent.token, body);
      expect(held.status).toBe(202);
      const view = held.body as ActionView;
      const validBefore = Date.parse(view.expires_at!) / 1000;
      // Approved (the enclave's approve_held and the action's row) once no more than the validity
      // margin (6 s) of the authorization is left, yet before it ends: a facilitator refuses such an
      // authorization (invalid_exact_evm_payload_authorization_valid_before). A quarter of a second
      // into that last margin, by the time the hold names, not a fixed wait from the hold's answer:
      // the approval's steps keep nearly the whole 6 s to finish in, however slow the hold was.
      await sleepUntil((validBefore - 6) * 1000 + 250);
      await approveHeld(agent, { nonce: body.nonce, to: SELLER_A, units: 1_000n, actionId: view.action_id });
      const signedBefore = signRequestsOf(agent);
      const late = await authorize(first.base, agent.token, body);
      expect(Math.floor(Date.now() / 1000)).toBeLessThan(validBefore);
      expect(late.status).toBe(403);
      expect(errorOf(late)).toMatchObject({ code: "policy_denied", rule: "x402.unknown_payee" });
      expect(signRequestsOf(agent)).toBe(signedBefore);
      expect(await budgets(agent.agentId)).toEqual([{ kind: "day", pay_to: null, count: 0, units: "0" }]);
    });

    it("an approval repeated with exactly the validity margin left by the origin's clock signs nothing: the repeat answers the hold's ending, not x402_validity_too_long when the enclave's clock turned the second meanwhile", async () => {
      const agent = await stack.newAgent();
      await setPolicy(agent, { x402: { payees: [], unknown_payee: "hold" } });
      const body = {
        payment_required: {
          ...quote(SELLER_A, 1_000n),
          accepts: [{ ...quote(SELLER_A, 1_000n).accepts[0]!, maxTimeoutSeconds: 9 }],
        },
        nonce: newNonce(),
      };
      const held = await authorize(first.base, agent.token, body);
      expect(held.status).toBe(202);
      const view = held.body as ActionView;
      const validBefore = Date.parse(view.expires_at!) / 1000;
      await approveHeld(agent, { nonce: body.nonce, to: SELLER_A, units: 1_000n, actionId: view.action_id });
      // Repeated in the second that leaves exactly the margin (6 s) by the origin's read; the enclave
      // reads its clock in the next one, when 5 s are left: it refused, and that answered 422
      // x402_validity_too_long. Signed in that second, no seller could have settled it anyway.
      await sleepUntil((validBefore - 6) * 1000 + 200);
      const signedBefore = signRequestsOf(agent);
      enclaveReadsNextSecond.add(agent.wallet.toLowerCase());
      const late = await authorize(first.base, agent.token, body).finally(() => {
        enclaveReadsNextSecond.delete(agent.wallet.toLowerCase());
      });
      expect(Math.floor(Date.now() / 1000)).toBeLessThan(validBefore);
      expect({ status: late.status, ...errorOf(late) }).toMatchObject({
        status: 403,
        code: "policy_denied",
        rule: "x402.unknown_payee",
      });
      expect(signRequestsOf(agent)).toBe(signedBefore);
      expect(await budgets(agent.agentId)).toEqual([{ kind: "day", pay_to: null, count: 0, units: "0" }]);
    });

    it("an approved authorization the agent never came back for ends expired once its quote's validity ran out (the tracker's sweep), and is never signed", async ({
      expect,
    }) => {
      const agent = await stack.newAgent();
      await setPolicy(agent, { x402: { payees: [], unknown_payee: "hold" } });
      const body = { payment_required: quote(SELLER_B, 1_000n), nonce: newNonce() };
      const held = await authorize(first.base, agent.token, body);
      expect(held.status).toBe(202);
      const actionId = (held.body as ActionView).action_id;
      // An operator approved it, and the quote's validity (its hold) has since run out.
      await db().execute(
        sql`update agent_actions set status = 'approved', hold_expires_at = now() - interval '1 second'
            where action_id = ${actionId}`,
      );
      const status = async () =>
        (
          await queryRows<{ status: string }>(
            db(),
            sql`select status from agent_actions where action_id = ${actionId}`,
          )
        )[0]?.status;
      await expect.poll(status, { timeout: 10_000, interval: 200 }).toBe("expired");
      const signedBefore = signRequestsOf(agent);
      const late = await authorize(first.base, agent.token, body);
      expect(late.status).toBe(403);
      expect(errorOf(late)).toMatchObject({ code: "policy_denied", rule: "x402.unknown_payee" });
      expect(signRequestsOf(agent)).toBe(signedBefore);
    });
  });

  describe("beside the waits", BESIDE, () => {
    it.sequential("pays listed sellers through one path; refuses B over its per-payment limit and, once the day's units are spent, the next authorization, each naming its rule; the check call answers each first and reserves nothing", async () => {
      const agent = await stack.newAgent();
      await setPolicy(agent, {
        x402: {
          payees: [
            { pay_to: SELLER_A, per_payment_units: "50000" },
            { pay_to: SELLER_B, per_payment_units: "10000" },
          ],
          daily_units: "60000",
        },
      });

      // A, 40,000: allowed, signed by the agent's wallet for exactly that.
      const payA = { payment_required: quote(SELLER_A, 40_000n), nonce: newNonce() };
      expect(await check(agent, payA.payment_required)).toEqual({ decision: "allow" });
      const paid = await authorize(first.base, agent.token, payA);
      expect(paid.status).toBe(200);
      const { authorization, signature } = (paid.body as X402AuthorizeResponse).payment_payload.payload;
      expect(authorization).toMatchObject({
        from: agent.wallet,
        to: SELLER_A,
        value: "40000",
        nonce: payA.nonce,
      });
      expect(
        await verifyTypedData({
          address: agent.wallet,
          domain: nativeTransferAuthDomain(),
          types: TRANSFER_WITH_AUTHORIZATION_TYPES,
          primaryType: "TransferWithAuthorization",
          message: {
            from: agent.wallet,
            to: SELLER_A,
            value: 40_000n,
            validAfter: 0n,
            validBefore: BigInt(authorization.validBefore),
            nonce: payA.nonce,
          },
          signature: signature as Hex,
        }),
      ).toBe(true);

      // B, 20,000: over B's 10,000 per payment. Nothing signed; the action ends failed; a repeat answers the same.
      const payB = { payment_required: quote(SELLER_B, 20_000n), nonce: newNonce() };
      const ruleB = `x402.payees[${SELLER_B}].per_payment_units`;
      expect(await check(agent, payB.payment_required)).toEqual({
        decision: "deny",
        rule: ruleB,
        remaining: "10000",
      });
      const signedBefore = signRequestsOf(agent);
      const refusedB = await authorize(second.base, agent.token, payB);
      expect(refusedB.status).toBe(403);
      expect(errorOf(refusedB)).toMatchObject({ code: "policy_denied", rule: ruleB, remaining: "10000" });
      const repeatB = await authorize(first.base, agent.token, payB);
      expect(repeatB.status).toBe(403);
      expect(errorOf(repeatB)).toMatchObject({ code: "policy_denied", rule: ruleB, remaining: "10000" });
      // The first answer again, byte for byte but for its request id.
      const withoutRequestId = (answer: Answer) => answer.text.replace(/"request_id":"[^"]*"/, "");
      expect(withoutRequestId(repeatB)).toBe(withoutRequestId(refusedB));
      expect(signRequestsOf(agent)).toBe(signedBefore);
      const deniedId = errorOf(refusedB).action_id!;
      const [action] = await queryRows<{ status: string; error_code: string; error_fields: unknown }>(
        db(),
        sql`select status, error_code, error_fields from agent_actions where action_id = ${deniedId}`,
      );
      // Stored with the refusal (agent-actions/refusal-fields.ts), in the answer's order.
      expect(action).toEqual({
        status: "failed",
        error_code: "policy_denied",
        error_fields: [
          ["rule", ruleB],
          ["remaining", "10000"],
        ],
      });
      // A denial stored before error_fields existed (null) still names its rule and what remained,
      // from signed_payload.denied. Mutation: dropping that fallback answers neither.
      await db().execute(sql`update agent_actions set error_fields = null where action_id = ${deniedId}`);
      const formerB = await authorize(first.base, agent.token, payB);
      expect(formerB.status).toBe(403);
      expect(withoutRequestId(formerB)).toBe(withoutRequestId(refusedB));

      // B, 10,000: allowed (50,000 of the day's 60,000 used).
      expect(
        (
          await authorize(second.base, agent.token, {
            payment_required: quote(SELLER_B, 10_000n),
            nonce: newNonce(),
          })
        ).status,
      ).toBe(200);
      expect(await budgets(agent.agentId)).toEqual([
        { kind: "day", pay_to: null, count: 2, units: "50000" },
        ...[
          { kind: "payee", pay_to: SELLER_A, count: null, units: "40000" },
          { kind: "payee", pay_to: SELLER_B, count: null, units: "10000" },
        ].sort((a, b) => (a.pay_to < b.pay_to ? -1 : 1)),
      ]);

      // A, 20,000: within A's limit, over what remains of the day (10,000).
      const over = { payment_required: quote(SELLER_A, 20_000n), nonce: newNonce() };
      expect(await check(agent, over.payment_required)).toEqual({
        decision: "deny",
        rule: "x402.daily_units",
        remaining: "10000",
      });
      const refused = await authorize(first.base, agent.token, over);
      expect(refused.status).toBe(403);
      expect(errorOf(refused)).toMatchObject({
        code: "policy_denied",
        rule: "x402.daily_units",
        remaining: "10000",
      });
      expect(signRequestsOf(agent)).toBe(signedBefore + 1);
    });

    it.sequential("a repeat of a quote answers the entry its first request was signed for, though an operator has since let the policy pay an earlier entry", async () => {
      // Mutation: chooseUnderPolicy taking the first allowed entry before the repeat's own answers
      // the repeat 409 idempotency_conflict here, its authorization out of the agent's reach.
      const agent = await stack.newAgent();
      const policy = (perPaymentToA: string): AgentPolicyDocument => ({
        x402: {
          payees: [
            { pay_to: SELLER_A, per_payment_units: perPaymentToA },
            { pay_to: SELLER_B, per_payment_units: "20000" },
          ],
        },
      });
      await setPolicy(agent, policy("5000"));
      const single = (payTo: string) => quote(payTo, 10_000n).accepts[0]!;
      const both = { ...quote(SELLER_A, 10_000n), accepts: [single(SELLER_A), single(SELLER_B)] };
      // A is over its per-payment limit: B's entry is signed.
      const paid = await authorize(first.base, agent.token, { payment_required: both });
      expect(paid.status, paid.text).toBe(200);
      expect((paid.body as X402AuthorizeResponse).payment_payload.accepted.payTo).toBe(SELLER_B);
      await setPolicy(agent, policy("50000"));
      const before = signRequestsOf(agent);
      const repeat = await authorize(second.base, agent.token, { payment_required: both });
      expect(repeat.status, repeat.text).toBe(200);
      expect(repeat.text).toBe(paid.text);
      expect(signRequestsOf(agent)).toBe(before);
    });

    it.sequential("holds an unknown payee (202 held, until the quote's validity), answers a repeat with the held action, and once an operator approved it signs it once", async () => {
      const agent = await stack.newAgent();
      await setPolicy(agent, {
        x402: { payees: [{ pay_to: SELLER_A, per_payment_units: "50000" }], unknown_payee: "hold" },
      });
      const body = { payment_required: quote(SELLER_C, 5_000n), nonce: newNonce() };
      expect(await check(agent, body.payment_required)).toEqual({
        decision: "hold",
        rule: "x402.unknown_payee",
        remaining: null,
      });
      const signedBefore = signRequestsOf(agent);
      const startedAt = Math.floor(Date.now() / 1000);
      const held = await authorize(first.base, agent.token, body);
      expect(held.status).toBe(202);
      const view = held.body as ActionView;
      expect(view).toMatchObject({
        kind: "x402",
        status: "held",
        rule: "x402.unknown_payee",
        to: SELLER_C,
        amount: "5000",
      });
      const expiresAt = Date.parse(view.expires_at!) / 1000;
      expect(expiresAt).toBeGreaterThanOrEqual(startedAt + 60 - 1);
      expect(expiresAt).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 60);
      // Nothing signed, nothing of the budgets taken.
      expect(signRequestsOf(agent)).toBe(signedBefore);
      expect(await budgets(agent.agentId)).toEqual([{ kind: "day", pay_to: null, count: 0, units: "0" }]);

      // A repeat while held: the held action, on either origin.
      const repeat = await authorize(second.base, agent.token, body);
      expect(repeat.status).toBe(202);
      expect(repeat.body).toMatchObject({ action_id: view.action_id, status: "held" });

      // Approved in the database alone (the enclave's approval missing): the enclave holds it again.
      await db().execute(
        sql`update agent_actions set status = 'approved' where action_id = ${view.action_id}`,
      );
      const unapproved = await authorize(first.base, agent.token, body);
      expect(unapproved.status).toBe(202);
      expect(unapproved.body).toMatchObject({
        action_id: view.action_id,
        status: "held",
        rule: "x402.unknown_payee",
      });
      expect(signRequestsOf(agent)).toBe(signedBefore + 1);
      // The enclave's refusal counted nothing.
      expect(await budgets(agent.agentId)).toEqual([{ kind: "day", pay_to: null, count: 0, units: "0" }]);

      // The operator approves (the enclave's approve_held, by the authorization's nonce), and `npm run policy -- approve` marks it approved.
      await approveHeld(agent, { nonce: body.nonce, to: SELLER_C, units: 5_000n, actionId: view.action_id });

      const [signed, again] = await Promise.all([
        authorize(first.base, agent.token, body),
        authorize(second.base, agent.token, body),
      ]);
      expect(signed.status).toBe(200);
      expect(again.text).toBe(signed.text);
      const payload = (signed.body as X402AuthorizeResponse).payment_payload.payload.authorization;
      // Exactly the authorization that was held: its nonce and its validity.
      expect(payload).toMatchObject({
        to: SELLER_C,
        value: "5000",
        nonce: body.nonce,
        validBefore: String(expiresAt),
      });
      expect(signRequestsOf(agent)).toBe(signedBefore + 2);
      expect((await authorize(first.base, agent.token, body)).text).toBe(signed.text);
      expect(signRequestsOf(agent)).toBe(signedBefore + 2);
    });

    it.sequential("without a policy, the pair only, as always; a rejected hold answers policy_denied with its rule", async () => {
      const agent = await stack.newAgent();
      expect(
        (
          await authorize(first.base, agent.token, {
            payment_required: quote(PAIR, AMOUNT),
            nonce: newNonce(),
          })
        ).status,
      ).toBe(200);
      const other = await authorize(first.base, agent.token, {
        payment_required: quote(SELLER_A, AMOUNT),
        nonce: newNonce(),
      });
      expect(other.status).toBe(422);
      expect(errorOf(other).code).toBe("x402_pay_to_not_allowed");
      expect(await check(agent, quote(SELLER_A, AMOUNT))).toEqual({
        decision: "deny",
        rule: "node.x402_pay_to_not_allowed",
        remaining: "0",
      });

      await setPolicy(agent, { x402: { payees: [], unknown_payee: "hold" } });
      const body = { payment_required: quote(SELLER_B, 1_000n), nonce: newNonce() };
      const held = await authorize(first.base, agent.token, body);
      expect(held.status).toBe(202);
      await db().execute(
        sql`update agent_actions set status = 'rejected' where action_id = ${(held.body as ActionView).action_id}`,
      );
      const rejected = await authorize(first.base, agent.token, body);
      expect(rejected.status).toBe(403);
      expect(errorOf(rejected)).toMatchObject({ code: "policy_denied", rule: "x402.unknown_payee" });
    });
  });

  it("50 concurrent authorizations against daily_count 10, across two origins on one database, sign exactly 10", async () => {
    const agent = await stack.newAgent();
    await setPolicy(agent, {
      x402: { payees: [{ pay_to: SELLER_A, per_payment_units: "1000" }], daily_count: 10 },
    });
    const signedBefore = signRequestsOf(agent);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        authorize(i % 2 === 0 ? first.base : second.base, agent.token, {
          payment_required: quote(SELLER_A, 100n),
          nonce: newNonce(),
        }),
      ),
    );
    const codes = answers.map((answer) =>
      answer.status === 200 ? "200" : `${answer.status} ${errorOf(answer).code} ${errorOf(answer).rule}`,
    );
    expect(codes.filter((code) => code === "200")).toHaveLength(10);
    expect(codes.filter((code) => code === "403 policy_denied x402.daily_count")).toHaveLength(40);
    // The gateway's count held: only the 10 reached the enclave.
    expect(signRequestsOf(agent) - signedBefore).toBe(10);
    expect(await budgets(agent.agentId)).toEqual([
      { kind: "day", pay_to: null, count: 10, units: "1000" },
      { kind: "payee", pay_to: SELLER_A, count: null, units: "1000" },
    ]);
  });

  it("a frozen node refuses every agent's authorization, with or without a policy, naming node.frozen; unfreezing takes an operator", async () => {
    const agent = await stack.newAgent();
    const freeze = async (frozen: boolean) => {
      const params: Record<string, unknown> = { frozen };
      if (!frozen) {
        // Over the freeze the enclave holds now: it lifts that one only.
        const { node_freeze_epoch: epoch } = expectOk(await enclave.request("get_policy", {}));
        params.freeze_epoch = epoch;
        params.operator = await operator.approve(
          "set_node_frozen",
          nodeFreezeSubject(false, epoch as number),
        );
      }
      expectOk(
        await enclave.request(
          "set_node_frozen",
          params,
          await mintFor(enclave, stack.enclave, "set_node_frozen", params),
        ),
      );
      await writeNodeFrozen(
        db(),
        { before: !frozen, frozen },
        frozen ? { by: "admin" } : { by: "operator", operatorKeyId: operator.keyId },
      );
    };
    await freeze(true);
    try {
      const body = { payment_required: quote(PAIR, AMOUNT), nonce: newNonce() };
      expect(await check(agent, body.payment_required)).toEqual({
        decision: "deny",
        rule: "node.frozen",
        remaining: "0",
      });
      const signedBefore = signRequestsOf(agent);
      const refused = await authorize(first.base, agent.token, body);
      expect(refused.status).toBe(403);
      expect(errorOf(refused)).toMatchObject({ code: "policy_denied", rule: "node.frozen" });
      expect(signRequestsOf(agent)).toBe(signedBefore);
    } finally {
      await freeze(false);
    }
    expect(
      (await authorize(first.base, agent.token, { payment_required: quote(PAIR, AMOUNT), nonce: newNonce() }))
        .status,
    ).toBe(200);
  });
  it("a ceiling sealed lower after the origins started: the enclave refuses what their view allows, x402_amount_not_allowed, and no budget is spent", async () => {
    const agent = await stack.newAgent();
    await setPolicy(agent, {
      x402: { payees: [{ pay_to: SELLER_C, per_payment_units: "50000" }], daily_count: 5 },
    });
    // The origins read the 1 USDC ceiling at start; the policy authority now seals 30,000.
    const reseal = async (maxUnits: bigint) => {
      const sealed = await stack.signer.configurePolicy(
        { ...stack.policy, x402MaxPerPaymentUnits: maxUnits },
        stack.authorities.policy,
      );
      expect(sealed.ok).toBe(true);
    };
    await reseal(30_000n);
    try {
      const body = { payment_required: quote(SELLER_C, 40_000n), nonce: newNonce() };
      // The gateway's view (the ceiling it read at start) allows it: the enclave has the last word.
      expect(await check(agent, body.payment_required)).toEqual({ decision: "allow" });
      const signedBefore = signRequestsOf(agent);
      const refused = await authorize(first.base, agent.token, body);
      expect(refused.status).toBe(422);
      expect(errorOf(refused).code).toBe("x402_amount_not_allowed");
      expect(signRequestsOf(agent)).toBe(signedBefore + 1);
      // What it reserved under the lock is freed: nothing of the day's count or units is used.
      const used = (await budgets(agent.agentId)).filter((row) => (row.count ?? 0) > 0 || row.units !== "0");
      expect(used).toEqual([]);
      expect(
        (
          await authorize(first.base, agent.token, {
            payment_required: quote(SELLER_C, 20_000n),
            nonce: newNonce(),
          })
        ).status,
      ).toBe(200);
    } finally {
      await reseal(CEILING);
    }
  });
});
