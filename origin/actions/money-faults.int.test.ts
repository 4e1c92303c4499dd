import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { startRewritingEnclaveProxy } from "../../testing/fault-enclave.ts";
import { enclaveDown, enclaveProfile, underFault } from "../../testing/fault-scenario.ts";
import { agentCalls, isAccepted, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { startTestOrigin } from "../../testing/origin.ts";
import { spawnOrigin } from "../../testing/origin-process.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";

// Money movement when parts fail or run twice, against the real processes: an enclave that is
// down, an origin killed between signing and broadcasting or between broadcast and receipt, two
// origins sharing one database.

describe("money movement under faults (real processes)", () => {
  const stack = useMoneyStack();
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    chain = publicClientFor(stack.devnet.url);
  });

  const sentBy = (wallet: string) =>
    queryRows<{ nonce: string; status: string }>(
      stack.db.handle.db,
      sql`select nonce::text as nonce, status from outgoing_transactions where sender = ${wallet.toLowerCase()}
          order by outgoing_transactions.nonce`,
    );

  it("answers 503 agent_signer_unavailable with the enclave down, signs nothing, and the retry succeeds once it is back", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const body = { idempotency_key: newKey(), to: newAccount().address, amount: "1000" };
    await underFault(enclaveDown(stack.enclave), async () => {
      const down = await calls.transfer(body);
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({ error: { code: "agent_signer_unavailable" } });
      expect(await sentBy(agent.wallet)).toEqual([]);
    });
    // The client reconnects with backoff; the same request, retried, goes through.
    let retried = await calls.transfer(body);
    for (let i = 0; i < 50 && retried.status === 503; i++) {
      await sleep(100);
      retried = await calls.transfer(body);
    }
    expect(isAccepted(retried)).toBe(true);
    expect((await calls.settled((retried.body as ActionView).action_id)).status).toBe("confirmed");
    expect(await sentBy(agent.wallet)).toEqual([{ nonce: "0", status: "confirmed" }]);
  });

  it("a signature whose answer never arrives: 503 says nothing was stored or sent and that it may still count against the sealed daily limit; the action stays requested and its retry signs once", async () => {
    // A FAKE in front of the real enclave loses the first sign_transfer answer on the way back (a
    // reply that never arrives, which the real enclave cannot be made to do on demand): the enclave
    // signed and counted it; the origin's signer client times out.
    let lose = true;
    const lossy = await startRewritingEnclaveProxy(stack.enclave.socketPath, (op, response) => {
      if (op !== "sign_transfer" || !lose) return response;
      lose = false;
      return undefined;
    });
    const origin = await startTestOrigin({
      database: stack.db.handle,
      rpcUrl: stack.devnet.url,
      env: stack.originEnv,
      signer: createSignerClient({
        endpoint: lossy.endpoint,
        liveIdentityEnabled: true,
        requestTimeoutMs: 1_000,
      }),
    });
    try {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const calls = agentCalls(origin.base, agent.token);
      const body = { idempotency_key: newKey(), to: newAccount().address, amount: "1000" };
      const timedOut = await calls.transfer(body);
      expect(timedOut.status).toBe(503);
      // Mutation: answering a timeout as any other unreachable signer ("the signer is unreachable")
      // fails this.
      expect(timedOut.body).toMatchObject({
        error: {
          code: "agent_signer_unavailable",
          message: expect.stringMatching(
            /nothing was stored or sent, though a signature it made meanwhile may still count against the wallet's sealed daily limit/,
          ),
        },
      });
      expect(await sentBy(agent.wallet)).toEqual([]);
      const retried = await calls.transfer(body);
      expect(isAccepted(retried)).toBe(true);
      expect((await calls.settled((retried.body as ActionView).action_id)).status).toBe("confirmed");
      expect(await sentBy(agent.wallet)).toEqual([{ nonce: "0", status: "confirmed" }]);
    } finally {
      await origin.close();
      await lossy.close();
    }
  });

  it("leaves the action requested while the enclave answers but cannot sign (another protocol profile): 503 says to retry with the same key, and that retry signs once", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const recipient = newAccount().address;
    const body = { idempotency_key: newKey(), to: recipient, amount: "1000" };
    const actionRow = () =>
      queryRows<{ status: string; error_code: string | null }>(
        stack.db.handle.db,
        sql`select status, error_code from agent_actions where agent_id = ${agent.agentId}`,
      );
    // Another version of the enclave on the socket: it answers, and refuses our profile.
    await underFault(enclaveProfile(stack.enclave, "bridge_operator"), async () => {
      for (let attempt = 0; attempt < 2; attempt++) {
        const refused = await calls.transfer(body);
        expect(refused.status).toBe(503);
        expect(await actionRow()).toEqual([{ status: "requested", error_code: "agent_signer_unavailable" }]);
        expect(refused.body).toMatchObject({
          error: {
            code: "agent_signer_unavailable",
            message: expect.stringMatching(/nothing was signed: retry with the same idempotency_key/),
            action_id: expect.any(String),
          },
        });
      }
      expect(await sentBy(agent.wallet)).toEqual([]);
    });
    let retried = await calls.transfer(body);
    for (let i = 0; i < 100 && retried.status === 503; i++) {
      await sleep(100);
      retried = await calls.transfer(body);
    }
    expect(retried.status, JSON.stringify(retried.body)).toBe(202);
    expect((await calls.settled((retried.body as ActionView).action_id)).status).toBe("confirmed");
    expect(await sentBy(agent.wallet)).toEqual([{ nonce: "0", status: "confirmed" }]);
    expect(await chain.getBalance({ address: recipient })).toBe(1_000n * WEI_PER_UNIT);
  });

  it("ends a request not retried in time abandoned: its key then answers 409 abandoned and signs nothing", async () => {
    const quick = await stack.startOrigin({}, { abandonAfterMs: 500 });
    // Closed at the end: its tracker would abandon any other test's action `requested` for 500 ms.
    onTestFinished(() => quick.close());
    const agent = await stack.newAgent({ units: 1_000_000n });
    const calls = agentCalls(quick.base, agent.token);
    const recipient = newAccount().address;
    const body = { idempotency_key: newKey(), to: recipient, amount: "1000" };
    await underFault(enclaveDown(stack.enclave), async () => {
      expect((await calls.transfer(body)).status).toBe(503);
    });
    const statusOf = async () => {
      const [row] = await queryRows<{ status: string; error_code: string }>(
        stack.db.handle.db,
        sql`select status, error_code from agent_actions where agent_id = ${agent.agentId}`,
      );
      return row;
    };
    for (let i = 0; i < 100 && (await statusOf())?.status === "requested"; i++) {
      await sleep(100);
    }
    expect(await statusOf()).toEqual({ status: "failed", error_code: "abandoned" });
    const repeat = await calls.transfer(body);
    expect(repeat.status).toBe(409);
    expect(repeat.body).toMatchObject({
      error: {
        code: "abandoned",
        message: expect.stringMatching(/nothing signed for it was kept or sent.*new idempotency_key/),
        action_id: expect.any(String),
      },
    });
    expect(await sentBy(agent.wallet)).toEqual([]);
    expect(await chain.getBalance({ address: recipient })).toBe(0n);
  });

  // The two crashes run beside each other (vitest runs adjacent concurrent tests at once): each has
  // its own agent, its own doomed origin and its own restarted one, and each checks only its own
  // agent's transaction, which any origin on the database may finish (docs/performance.md, "The
  // test suite").
  for (const crashAt of ["after_signed", "after_broadcast"] as const) {
    it.concurrent(`puts exactly one transaction on chain when the origin is SIGKILLed ${crashAt.replace("_", " ")}`, async () => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const recipient = newAccount().address;
      const doomed = await spawnOrigin({
        entry: "testing/money-crash-origin.ts",
        // A 1 s chain timeout makes its broadcast lease 3 s: the next origin takes over after it.
        env: { ...stack.processEnv({ CHAIN_RPC_TIMEOUT_MS: "1000" }), MONEY_CRASH_AT: crashAt },
      });
      const body = { idempotency_key: newKey(), to: recipient, amount: "2500" };
      // The answer (`signed`, 202) precedes the broadcast, so the kill comes before it or after it;
      // either way the agent's retry with the same key is what follows.
      const answered = await agentCalls(doomed.base, agent.token)
        .transfer(body)
        .catch(() => undefined);
      if (answered) expect(answered).toMatchObject({ status: 202, body: { status: "signed" } });
      expect(await doomed.exited).toBe("SIGKILL");
      // One stored transaction; the stack's own origin may already be finishing it (it shares the
      // database), which is the point: whichever origin comes next, nothing is signed again.
      const left = await sentBy(agent.wallet);
      expect(left).toHaveLength(1);
      expect(left[0]!.nonce).toBe("0");
      // `signed` until a broadcast is recorded: the doomed origin died before recording its own.
      expect(["signed", "submitted", "confirmed"]).toContain(left[0]!.status);

      // A restarted origin finishes it: the stored bytes are sent (again), never re-signed.
      const restarted = await stack.startOrigin({}, { signedGraceMs: 200 });
      const calls = agentCalls(restarted.base, agent.token);
      const repeat = await calls.transfer(body);
      const done = await calls.settled((repeat.body as ActionView).action_id);
      expect(done.status).toBe("confirmed");
      expect(await sentBy(agent.wallet)).toEqual([{ nonce: "0", status: "confirmed" }]);
      expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);
      expect(await chain.getBalance({ address: recipient })).toBe(2_500n * WEI_PER_UNIT);
    });
  }

  it("a payout the enclave signed for an origin SIGKILLed before storing it: the agent's retry with its key is paid once, not charged a cooldown for a payout it never got", async () => {
    const agent = await stack.newAgent();
    const paidBefore = (await sentBy(stack.treasury)).length;
    const doomed = await spawnOrigin({
      entry: "testing/money-crash-origin.ts",
      env: { ...stack.processEnv(), MONEY_CRASH_AT: "after_enclave_signed" },
    });
    const key = newKey();
    // The enclave signed the payout and counted it against the agent's sealed cooldown; the origin
    // died before its transaction committed, so nothing of it is stored and nothing was sent.
    expect(
      await agentCalls(doomed.base, agent.token)
        .faucet(key)
        .catch(() => undefined),
    ).toBeUndefined();
    expect(await doomed.exited).toBe("SIGKILL");
    expect(await sentBy(stack.treasury)).toHaveLength(paidBefore);

    // Mutation: the enclave refusing any payout inside the recipient's cooldown answers this 429
    // faucet_cooldown (retry in 60 s) for a payout the agent never got.
    const calls = agentCalls(stack.origin.base, agent.token);
    const retried = await calls.faucet(key);
    expect(isAccepted(retried), JSON.stringify(retried.body)).toBe(true);
    expect((await calls.settled((retried.body as ActionView).action_id)).status).toBe("confirmed");
    expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
    expect(await sentBy(stack.treasury)).toHaveLength(paidBefore + 1);
    // Paid once: the next payout is inside the cooldown of this one.
    expect((await calls.faucet()).body).toMatchObject({ error: { code: "faucet_cooldown" } });
  });

  it("sends 100 transfers through two origin processes on one database with no nonce used twice", async () => {
    const agents: StackAgent[] = [];
    for (let i = 0; i < 4; i++) agents.push(await stack.newAgent({ units: 1_000_000n }));
    const origins = await Promise.all([0, 1].map(() => spawnOrigin({ env: stack.processEnv() })));
    try {
      const recipient = newAccount().address;
      const responses = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          agentCalls(origins[i % 2]!.base, agents[i % 4]!.token).transfer({
            idempotency_key: newKey(),
            to: recipient,
            amount: "100",
          }),
        ),
      );
      expect(
        responses.filter((response) => !isAccepted(response)).map((r) => JSON.stringify(r.body)),
      ).toEqual([]);
      for (const [i, response] of responses.entries()) {
        const view = await agentCalls(origins[0]!.base, agents[i % 4]!.token).settled(
          (response.body as ActionView).action_id,
        );
        expect(view.status).toBe("confirmed");
      }
      for (const agent of agents) {
        const sent = await sentBy(agent.wallet);
        expect(sent.map((row) => row.nonce)).toEqual(Array.from({ length: 25 }, (_, i) => String(i)));
        expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(25);
      }
      expect(await chain.getBalance({ address: recipient })).toBe(100n * 100n * WEI_PER_UNIT);
    } finally {
      await Promise.all(origins.map((origin) => origin.stop()));
    }
  });
});
