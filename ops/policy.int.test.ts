import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import { queryRows } from "../origin/db/client.ts";
import type { ActionView, X402AuthorizeResponse } from "../shared/gateway-schemas.ts";
import { sealHeldApproval } from "../testing/held-approval.ts";
import { send } from "../testing/http.ts";
import { backendPid, waitUntilBlockedBy } from "../testing/lock-waiters.ts";
import { agentCalls, newKey } from "../testing/money-client.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { spawnOrigin } from "../testing/origin-process.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { signTransferOverSocket } from "../testing/socket-transfer.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { afterWholeTicks } from "../testing/worker-ticks.ts";
import { SELLER_EXTRA, sellerQuote } from "../testing/x402-quote.ts";
import { readOperatorKey } from "./lib/operator-key.ts";

// The operator's `npm run policy` as a process, against a real enclave, Postgres, the origin of a
// money stack and the devnet: what it prints, what it exits with, what the database and the
// enclave hold afterwards, and what the agent then meets at the gateway.

const PAIR = newAccount().address.toLowerCase() as Address;
const SELLER_A = newAccount().address.toLowerCase() as Address;
const SELLER_C = newAccount().address.toLowerCase() as Address;

/** A chain-77 quote paying `payTo` `amount` units, as a seller's 402 body carries it. */
const quote = (payTo: string, amount: bigint) =>
  sellerQuote({
    payTo,
    amount,
    url: `https://${payTo.slice(2, 8)}.seller.test/item`,
    description: "an item",
    extra: SELLER_EXTRA,
  });

// Tests of one agent each (its own agent, its policy, its actions, the operator key enrolled first)
// run beside each other (vitest runs adjacent concurrent tests at once); those that change what
// every test sees or reads (the enrolment, the node's freeze, the reseal's count of every agent's
// policy, the revoked operator key) run alone, in turn.
describe("npm run policy (real CLI, enclave, database, origin, devnet)", { concurrent: true }, () => {
  // Per transaction 10 USDC, 50 USDC a day (the stack's sealed policy); x402 on, with the node's
  // ceiling `npm start` seals (1 USDC a payment to any payee), so a policy may name any seller.
  const stack = useMoneyStack(
    {
      x402: { amountUnits: 10_000n, payTo: PAIR },
      policy: { x402MaxPerPaymentUnits: 1_000_000n, x402Payees: null },
    },
    { timeoutMs: 180_000 },
  );
  let dir: string;
  let adminKeyFile: string;
  let policyKeyFile: string;
  let operatorKeyFile: string;
  let operatorKeyId: string;
  /** Every output of every run: none may carry key material. */
  const outputs: string[] = [];

  const policy = async (...args: string[]): Promise<ToolRun> => {
    const run = await runTool("ops/policy.ts", args, {
      env: stack.processEnv({ AGENT_ADMIN_AUTHORITY_KEY_FILE: adminKeyFile, LOG_LEVEL: "silent" }),
    });
    outputs.push(run.stdout, run.stderr);
    return run;
  };
  /** `approve --agent --action` signed with an operator key file. */
  const approve = (agentId: string, actionId: string, keyFile: string): Promise<ToolRun> =>
    policy("approve", "--agent", agentId, "--action", actionId, "--operator-key", keyFile);
  const db = () => stack.db.handle.db;
  const health = async (): Promise<unknown> => (await fetch(`${stack.origin.base}/healthz`)).json();
  const policyFile = async (document: unknown): Promise<string> => {
    const file = join(dir, `policy-${newKey()}.json`);
    await writeFile(file, JSON.stringify(document));
    return file;
  };
  const stored = async (agentId: string) =>
    (
      await queryRows<{ policy: unknown; version: number }>(
        db(),
        sql`select policy, version from agent_policies where agent_id = ${agentId}`,
      )
    )[0] ?? null;
  const enclaveVersion = async (agent: StackAgent): Promise<number> => {
    const status = await stack.signer.getAgentPolicy({ keyRef: agent.keyRef });
    if (!status.ok) throw new Error(status.error.code);
    return status.value.version;
  };
  const lastChange = async (agentId: string | null) =>
    (
      await queryRows<{ changed_by: string; operator_key_id: string | null; after: unknown }>(
        db(),
        agentId === null
          ? sql`select changed_by, operator_key_id, after from policy_changes where agent_id is null order by change_id desc limit 1`
          : sql`select changed_by, operator_key_id, after from policy_changes where agent_id = ${agentId} order by change_id desc limit 1`,
      )
    )[0];
  const sent = async (agent: StackAgent): Promise<number> =>
    (
      await queryRows<{ n: number }>(
        db(),
        sql`select count(*)::int as n from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}`,
      )
    )[0]!.n;
  const transfer = (agent: StackAgent, amount: string) =>
    agentCalls(stack.origin.base, agent.token).transfer({
      idempotency_key: newKey(),
      to: newAccount().address,
      amount,
    });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "policy-cli-"));
    adminKeyFile = join(dir, "admin-authority.key");
    policyKeyFile = join(dir, "policy-authority.key");
    operatorKeyFile = join(dir, "operator.key");
    const hex = (secret: Uint8Array) => `${Buffer.from(secret).toString("hex")}\n`;
    await writeFile(adminKeyFile, hex(stack.enclave.adminSecret), { mode: 0o600 });
    await writeFile(policyKeyFile, hex(stack.enclave.policySecret), { mode: 0o600 });
  });
  afterAll(async () => {
    // No run printed a key: the operator key's PEM body, nor the admin or policy seed.
    const pem = (await readFile(operatorKeyFile, "utf8").catch(() => ""))
      .split("\n")
      .filter((line) => line.length > 20 && !line.startsWith("-----"));
    const secrets = [
      ...pem,
      Buffer.from(stack.enclave.adminSecret).toString("hex"),
      Buffer.from(stack.enclave.policySecret).toString("hex"),
    ];
    const all = outputs.join("\n");
    for (const secret of secrets) expect(all).not.toContain(secret);
    expect(outputs.length).toBeGreaterThan(0);
    await rm(dir, { recursive: true, force: true });
  });

  it.sequential("enroll makes the operator key (0600) and enrolls it with the policy key, idempotently", async () => {
    expect((await policy("enroll", "--operator-key", operatorKeyFile)).code).toBe(2);
    // The admin key is not the policy authority: the enclave refuses, exit 1.
    const wrongTier = await policy(
      "enroll",
      "--operator-key",
      join(dir, "other.key"),
      "--policy-key",
      adminKeyFile,
    );
    expect(wrongTier.code).toBe(1);
    expect(wrongTier.stderr).toContain("capability_rejected");

    const made = await policy(
      "enroll",
      "--operator-key",
      operatorKeyFile,
      "--policy-key",
      policyKeyFile,
      "--label",
      "ops laptop",
    );
    expect(made.stderr).toBe("");
    expect(made.code).toBe(0);
    expect(made.stdout).toContain(`made ${operatorKeyFile}`);
    operatorKeyId = /operator key (op-[0-9a-f]{16}) enrolled/.exec(made.stdout)![1]!;
    expect((await stat(operatorKeyFile)).mode & 0o777).toBe(0o600);

    const again = await policy(
      "enroll",
      "--operator-key",
      operatorKeyFile,
      "--policy-key",
      policyKeyFile,
      "--json",
    );
    expect(again.code).toBe(0);
    const json = JSON.parse(again.stdout) as { key_id: string; public_key: string; created: boolean };
    expect(json).toMatchObject({ key_id: operatorKeyId, created: false });
    const sealed = await stack.signer.getPolicy();
    if (!sealed.ok) throw new Error(sealed.error.code);
    expect(sealed.value.operatorKeys).toContainEqual({
      keyId: operatorKeyId,
      publicKey: json.public_key,
      label: "ops laptop",
    });
  });

  it("set tightens without a key, refuses a loosening without one (naming the field, nothing changed), loosens with one", async () => {
    const agent = await stack.newAgent();
    const tight = await policy(
      "set",
      "--agent",
      agent.agentId,
      "--file",
      await policyFile({ transfers: { per_tx_units: "5000000" } }),
    );
    expect(tight.stderr).toBe("");
    expect(tight.code).toBe(0);
    expect(await stored(agent.agentId)).toEqual({
      policy: { transfers: { per_tx_units: "5000000" } },
      version: 1,
    });
    expect(await lastChange(agent.agentId)).toMatchObject({ changed_by: "admin", operator_key_id: null });

    const looser = await policyFile({ transfers: { per_tx_units: "8000000" } });
    const refused = await policy("set", "--agent", agent.agentId, "--file", looser);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("loosens the policy (transfers.per_tx_units)");
    expect(await stored(agent.agentId)).toMatchObject({
      version: 1,
      policy: { transfers: { per_tx_units: "5000000" } },
    });
    expect(await enclaveVersion(agent)).toBe(1);

    const loosened = await policy(
      "set",
      "--agent",
      agent.agentId,
      "--file",
      looser,
      "--operator-key",
      operatorKeyFile,
    );
    expect(loosened.stderr).toBe("");
    expect(loosened.code).toBe(0);
    expect(loosened.stdout).toContain(`approved by operator key ${operatorKeyId}`);
    expect(await stored(agent.agentId)).toEqual({
      policy: { transfers: { per_tx_units: "8000000" } },
      version: 2,
    });
    expect(await enclaveVersion(agent)).toBe(2);
    expect(await lastChange(agent.agentId)).toMatchObject({
      changed_by: "operator",
      operator_key_id: operatorKeyId,
    });

    const shown = await policy("show", "--agent", agent.agentId, "--json");
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      agent_id: agent.agentId,
      policy: { transfers: { per_tx_units: "8000000" } },
      version: 2,
      node_frozen: false,
      held: [],
      enclave: { version: 2, node_frozen: false, usage: { transfers: { day_units: "0", day_count: 0 } } },
    });
    const table = await policy("show", "--agent", agent.agentId);
    expect(table.stdout).toMatch(/policy +version 2 /);

    // A document the schema refuses is the command line's fault (exit 2); an unknown agent is refused.
    expect(
      (
        await policy(
          "set",
          "--agent",
          agent.agentId,
          "--file",
          await policyFile({ transfers: { per_tx: "1" } }),
        )
      ).code,
    ).toBe(2);
    const unknown = await policy("show", "--agent", "00000000-0000-4000-8000-000000000000");
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringContaining("no agent") });
  });

  it("freeze --agent refuses the agent's next transfer (rule frozen, nothing signed); unfreeze needs the key", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const frozen = await policy("freeze", "--agent", agent.agentId);
    expect(frozen.stderr).toBe("");
    expect(frozen.code).toBe(0);
    expect(await stored(agent.agentId)).toMatchObject({ policy: { frozen: true } });
    expect(await lastChange(agent.agentId)).toMatchObject({ changed_by: "admin" });

    const refused = await transfer(agent, "1000000");
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: "policy_denied", rule: "frozen" } });
    expect(await sent(agent)).toBe(0);

    const noKey = await policy("unfreeze", "--agent", agent.agentId);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain("--operator-key");
    expect(await stored(agent.agentId)).toMatchObject({ policy: { frozen: true } });

    const unfrozen = await policy("unfreeze", "--agent", agent.agentId, "--operator-key", operatorKeyFile);
    expect(unfrozen.stderr).toBe("");
    expect(unfrozen.code).toBe(0);
    // It had no policy before the freeze: it has none after.
    expect(await stored(agent.agentId)).toBeNull();
    expect(await lastChange(agent.agentId)).toMatchObject({
      changed_by: "operator",
      operator_key_id: operatorKeyId,
    });
    const works = await transfer(agent, "1000000");
    expect(works.status).toBe(202);
    expect(
      (await agentCalls(stack.origin.base, agent.token).settled((works.body as ActionView).action_id)).status,
    ).toBe("confirmed");
  });

  it("freeze --agent of an agent whose enclave holds a tighter policy than the database freezes it on the enclave's: refused rule frozen", async () => {
    // Mutation: a freeze built on the stored policy alone (as it was) loosens the enclave's daily
    // budget from 5 to 10 USDC: the enclave refuses it without an operator, and the agent cannot
    // be frozen alone.
    const agent = await stack.newAgent({ units: 20_000_000n });
    const budget = await policyFile({ transfers: { daily_units: "10000000" } });
    expect((await policy("set", "--agent", agent.agentId, "--file", budget)).code).toBe(0);
    // A change sealed whose row was lost (the origin died after the seal), made straight over the socket.
    const tighter = { transfers: { daily_units: "5000000" } };
    const sealed = await stack.signer.setAgentPolicy(
      { keyRef: agent.keyRef, policy: tighter },
      stack.authorities.admin,
    );
    expect(sealed.ok).toBe(true);

    const frozen = await policy("freeze", "--agent", agent.agentId);
    expect(frozen.stderr).toBe("");
    expect(frozen.code).toBe(0);
    expect(await stored(agent.agentId)).toMatchObject({ policy: { ...tighter, frozen: true } });
    const held = await stack.signer.getAgentPolicy({ keyRef: agent.keyRef });
    expect(held.ok && held.value.policy).toEqual({ ...tighter, frozen: true });
    const refused = await transfer(agent, "1000000");
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: "policy_denied", rule: "frozen" } });
    expect(await sent(agent)).toBe(0);
  });

  it.sequential("freeze --all refuses every agent's transfer (rule node.frozen); unfreeze --all needs the key", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    try {
      const frozen = await policy("freeze", "--all");
      expect(frozen.stderr).toBe("");
      expect(frozen.code).toBe(0);
      expect(await lastChange(null)).toMatchObject({ changed_by: "admin", after: { frozen: true } });
      const refused = await transfer(agent, "1000000");
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ error: { code: "policy_denied", rule: "node.frozen" } });
      expect(await sent(agent)).toBe(0);
      // Reads still work.
      const read = await send(`${stack.origin.base}/agent/v1/balance`, {
        headers: { authorization: `Bearer ${agent.token}` },
      });
      expect(read.status).toBe(200);
      expect((await policy("unfreeze", "--all")).code).toBe(2);
      expect((await policy("show", "--agent", agent.agentId, "--json")).stdout).toContain(
        '"node_frozen": true',
      );
    } finally {
      const unfrozen = await policy("unfreeze", "--all", "--operator-key", operatorKeyFile);
      expect(unfrozen.stderr).toBe("");
      expect(unfrozen.code).toBe(0);
    }
    expect(await lastChange(null)).toMatchObject({
      changed_by: "operator",
      operator_key_id: operatorKeyId,
      after: { frozen: false },
    });
    const works = await transfer(agent, "1000000");
    expect(works.status).toBe(202);
  });

  it("approve has a held transfer signed and confirmed once; a second approve is refused; reject ends another rejected, never signed", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    expect(
      (
        await policy(
          "set",
          "--agent",
          agent.agentId,
          "--file",
          await policyFile({ approval_above_units: "1000000" }),
        )
      ).code,
    ).toBe(0);
    const calls = agentCalls(stack.origin.base, agent.token);

    const first = await transfer(agent, "2000000");
    expect(first.status).toBe(202);
    const held = first.body as ActionView;
    expect(held).toMatchObject({ status: "held", rule: "approval_above_units" });
    const second = (await transfer(agent, "3000000")).body as ActionView;
    expect(second.status).toBe("held");

    const shown = JSON.parse((await policy("show", "--agent", agent.agentId, "--json")).stdout) as {
      held: Array<{ action_id: string; kind: string; amount: string; rule: string }>;
    };
    expect(shown.held).toEqual([
      expect.objectContaining({
        action_id: held.action_id,
        kind: "transfer",
        amount: "2000000",
        rule: "approval_above_units",
      }),
      expect.objectContaining({ action_id: second.action_id, amount: "3000000" }),
    ]);

    expect((await policy("approve", "--agent", agent.agentId, "--action", held.action_id)).code).toBe(2);
    const other = await stack.newAgent();
    const notTheirs = await approve(other.agentId, held.action_id, operatorKeyFile);
    expect(notTheirs).toMatchObject({ code: 1, stderr: expect.stringContaining("no action") });
    expect(await sent(agent)).toBe(0);

    const approved = await approve(agent.agentId, held.action_id, operatorKeyFile);
    expect(approved.stderr).toBe("");
    expect(approved.code).toBe(0);
    expect((await calls.settled(held.action_id)).status).toBe("confirmed");
    expect(await sent(agent)).toBe(1);

    const twice = await approve(agent.agentId, held.action_id, operatorKeyFile);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain("is confirmed, not held");

    const rejected = await policy("reject", "--agent", agent.agentId, "--action", second.action_id);
    expect(rejected.stderr).toBe("");
    expect(rejected.code).toBe(0);
    // Two whole rounds of the origin's approved-transfer loop after the rejection sign nothing.
    await afterWholeTicks([stack.origin], "approved-transfers", 2);
    expect((await calls.action(second.action_id)).body).toMatchObject({ status: "rejected" });
    expect(await sent(agent)).toBe(1);
    const again = await policy("reject", "--agent", agent.agentId, "--action", second.action_id);
    expect(again).toMatchObject({ code: 1, stderr: expect.stringContaining("is rejected, not held") });
  });

  it("approve while another operator rejects the action: refused, and the enclave holds no approval a compromised origin could sign with", async () => {
    // Mutation: sealing the approval before the action is moved to approved (as it did) leaves it
    // in the enclave when the rejection wins: the enclave then signs the transfer below.
    const agent = await stack.newAgent({ units: 20_000_000n });
    const limit = await policyFile({ approval_above_units: "1000000" });
    expect((await policy("set", "--agent", agent.agentId, "--file", limit)).code).toBe(0);
    const to = newAccount().address;
    const asked = await agentCalls(stack.origin.base, agent.token).transfer({
      idempotency_key: newKey(),
      to,
      amount: "2000000",
    });
    expect(asked.status).toBe(202);
    const actionId = (asked.body as ActionView).action_id;
    let approving: Promise<ToolRun> | undefined;
    // The other operator's rejection holds the action's row while the approve runs, and commits
    // once the approve waits on it.
    await db().transaction(async (tx) => {
      await tx.execute(sql`select 1 from agent_actions where action_id = ${actionId} for update`);
      approving = approve(agent.agentId, actionId, operatorKeyFile);
      // The approve's move from held (ops/lib/policy-holds.ts decideHeld), blocked by this
      // transaction: another statement on agent_actions waiting (an origin's worker, another
      // file's database) does not count.
      await waitUntilBlockedBy(db(), {
        holder: await backendPid(tx),
        statement: "^update agent_actions set status = .* and status = 'held'",
        what: "the approve waits at the action's row",
        timeoutMs: 60_000,
      });
      await tx.execute(
        sql`update agent_actions set status = 'rejected', updated_at = now() where action_id = ${actionId}`,
      );
    });
    const approved = await approving!;
    expect(approved).toMatchObject({ code: 1, stderr: expect.stringContaining("became rejected meanwhile") });
    // What a compromised origin would do with an approval of a rejected action.
    const signed = await signTransferOverSocket(stack.signer, agent, {
      to,
      valueUnits: 2_000_000n,
      actionId,
      nonce: 1_000n,
    });
    expect(signed.ok ? "signed" : signed.error.detail).toBe("policy_held");
  });

  it("approve of a held x402 authorization approves its nonce: the agent's repeat is then signed, that authorization exactly", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const document = {
      x402: { payees: [{ pay_to: SELLER_A, per_payment_units: "50000" }], unknown_payee: "hold" },
    };
    // A payee list the node's pair does not cover, and holding unknown payees, both loosen.
    const refused = await policy("set", "--agent", agent.agentId, "--file", await policyFile(document));
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining("x402.payees") });
    expect(
      (
        await policy(
          "set",
          "--agent",
          agent.agentId,
          "--file",
          await policyFile(document),
          "--operator-key",
          operatorKeyFile,
        )
      ).code,
    ).toBe(0);

    const body = { payment_required: quote(SELLER_C, 5_000n), nonce: `0x${"ab".repeat(32)}` };
    // Raw fetch: the OpenAPI document does not declare authorize's 202 `held` yet (testing/http.ts checks it).
    const authorize = async () => {
      const response = await fetch(`${stack.origin.base}/agent/v1/x402/authorize`, {
        method: "POST",
        headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as unknown };
    };
    const held = await authorize();
    expect(held.status).toBe(202);
    const view = held.body as ActionView;
    expect(view).toMatchObject({ kind: "x402", status: "held", rule: "x402.unknown_payee" });

    const approved = await approve(agent.agentId, view.action_id, operatorKeyFile);
    expect(approved.stderr).toBe("");
    expect(approved.code).toBe(0);
    expect(approved.stdout).toContain("signed when the agent asks again");
    const signed = await authorize();
    expect(signed.status).toBe(200);
    expect((signed.body as X402AuthorizeResponse).payment_payload.payload.authorization).toMatchObject({
      to: SELLER_C,
      value: "5000",
      nonce: body.nonce,
    });
  });

  it.sequential("reseal seals again what the database stores and the enclave lost (its policies, the node's freeze), once", async () => {
    // What a recovery leaves: the new enclave holds the agent's key and no policy, while the
    // database still stores one (written here as the lost enclave's change had stored it).
    const agent = await stack.newAgent();
    const document = { transfers: { per_tx_units: "3000000" } };
    await db().execute(
      sql`insert into agent_policies (agent_id, policy, version) values (${agent.agentId}, ${JSON.stringify(document)}::jsonb, 4)`,
    );
    const lost = await stack.signer.getAgentPolicy({ keyRef: agent.keyRef });
    expect(lost.ok && lost.value).toMatchObject({ policy: null, version: 0 });
    await db().execute(sql`update node_policy set frozen = true where id = 1`);
    try {
      // Before the reseal the origin says so: /healthz degraded with the instruction, and a start
      // logs it as a warning and starts.
      expect(await health()).toMatchObject({
        status: "degraded",
        enclave: {
          ok: true,
          keys: { ok: true },
          policies: {
            behind: 1,
            freeze_missing: true,
            ok: false,
            instruction: expect.stringContaining("npm run policy -- reseal"),
          },
        },
      });
      // The gateway off: no worker of its own (its refill would take keys the stack hands out).
      const started = await spawnOrigin({ env: stack.processEnv({ AGENT_GATEWAY_ENABLED: "" }) });
      await started.stop();
      expect(started.output()).toMatch(/"behind":1,"freeze_missing":true,.*npm run policy -- reseal/);

      const resealed = await policy("reseal", "--json");
      expect(resealed.stderr).toBe("");
      expect(resealed.code).toBe(0);
      const report = JSON.parse(resealed.stdout) as {
        resealed: { agent_id: string; version: number }[];
        refused: unknown[];
        node_frozen: string;
      };
      expect(report.resealed).toEqual([{ agent_id: agent.agentId, version: 1 }]);
      expect(report).toMatchObject({ refused: [], node_frozen: "sealed" });
      const held = await stack.signer.getAgentPolicy({ keyRef: agent.keyRef });
      expect(held.ok && held.value).toMatchObject({ policy: document, version: 1 });
      expect(await stored(agent.agentId)).toEqual({ policy: document, version: 1 });
      expect(await lastChange(agent.agentId)).toMatchObject({ changed_by: "admin", after: document });
      const sealed = await stack.signer.getPolicy();
      expect(sealed.ok && sealed.value.nodeFrozen).toBe(true);
      expect(await health()).toMatchObject({
        status: "ok",
        enclave: { policies: { behind: 0, freeze_missing: false, ok: true } },
      });

      const again = await policy("reseal");
      expect(again.code).toBe(0);
      expect(again.stdout).toMatch(
        /^reseal: 0 sealed again, \d+ already held as stored, 0 refused; the node's freeze already held$/m,
      );

      // The enclave holds a tighter policy than the database (a change sealed, then not stored):
      // sealing the stored one would loosen it, which the admin key cannot; that agent is refused.
      const tighter = await stack.newAgent();
      expect(
        (
          await policy(
            "set",
            "--agent",
            tighter.agentId,
            "--file",
            await policyFile({ transfers: { per_tx_units: "1000000" } }),
          )
        ).code,
      ).toBe(0);
      await db().execute(
        sql`update agent_policies set policy = ${JSON.stringify(document)}::jsonb where agent_id = ${tighter.agentId}`,
      );
      const loosening = await policy("reseal");
      expect(loosening.code).toBe(1);
      expect(loosening.stdout).toContain(
        `agent ${tighter.agentId}'s policy not sealed: refused by the enclave`,
      );
      expect(loosening.stderr).toBe("policy: 1 policies not sealed again\n");
      await db().execute(sql`delete from agent_policies where agent_id = ${tighter.agentId}`);
    } finally {
      const unfrozen = await policy("unfreeze", "--all", "--operator-key", operatorKeyFile);
      expect(unfrozen.code).toBe(0);
    }
  });

  it.sequential("revoke-operator-key: a lost operator key file approves nothing from then on (the held transfer stays held, nothing signed), and is never enrolled again", async () => {
    const lostKeyFile = join(dir, "lost-laptop.key");
    const enrolled = await policy(
      "enroll",
      "--operator-key",
      lostKeyFile,
      "--policy-key",
      policyKeyFile,
      "--json",
    );
    expect(enrolled.code).toBe(0);
    const lostKeyId = (JSON.parse(enrolled.stdout) as { key_id: string }).key_id;
    const agent = await stack.newAgent({ units: 20_000_000n });
    const set = await policy(
      "set",
      "--agent",
      agent.agentId,
      "--file",
      await policyFile({ approval_above_units: "1000000" }),
    );
    expect(set.code).toBe(0);
    const held = (await transfer(agent, "2000000")).body as ActionView;
    expect(held.status).toBe("held");

    const enclavePolicy = (...args: string[]): Promise<ToolRun> =>
      runTool("ops/enclave-policy.ts", args, {
        env: stack.processEnv({ AGENT_ADMIN_AUTHORITY_KEY_FILE: adminKeyFile, LOG_LEVEL: "silent" }),
      });
    const revoked = await enclavePolicy("revoke-operator-key", lostKeyId, "--json");
    expect(revoked.stderr).toBe("");
    expect(revoked.code).toBe(0);
    const first = JSON.parse(revoked.stdout) as { key_id: string; revoked_at: string };
    expect(first.key_id).toBe(lostKeyId);

    const withLost = await approve(agent.agentId, held.action_id, lostKeyFile);
    expect(withLost.code).toBe(1);
    expect(withLost.stderr).toContain(`(key id ${lostKeyId}, at ${first.revoked_at})`);
    // Whoever holds the file signs without the CLI's check: the enclave refuses it for the revoke.
    const direct = await sealHeldApproval(
      stack,
      { key: await readOperatorKey(lostKeyFile), keyId: lostKeyId },
      agent,
      {
        actionId: held.action_id,
        to: held.to as Address,
        valueUnits: 2_000_000n,
        expiresAt: Math.floor(Date.parse(held.expires_at!) / 1000),
      },
    );
    expect(direct.ok || direct.error.reason).toBe(
      `operator key ${lostKeyId} was revoked: it approves nothing`,
    );
    await afterWholeTicks([stack.origin], "approved-transfers", 2);
    expect((await agentCalls(stack.origin.base, agent.token).action(held.action_id)).body).toMatchObject({
      status: "held",
    });
    expect(await sent(agent)).toBe(0);

    // Not enrolled again, under its id or another; a repeat of the revoke answers the first.
    const again = await policy("enroll", "--operator-key", lostKeyFile, "--policy-key", policyKeyFile);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("revoked");
    const repeat = await enclavePolicy("revoke-operator-key", lostKeyId, "--json");
    expect(repeat.code).toBe(0);
    expect(JSON.parse(repeat.stdout)).toEqual(first);
    // The other operator's key still approves.
    const approved = await approve(agent.agentId, held.action_id, operatorKeyFile);
    expect(approved.code).toBe(0);
  });
});
