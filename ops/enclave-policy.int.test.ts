import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { privileged } from "../enclave/testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "../enclave/testing/raw-client.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../testing/enclave-process.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";

// The operator applies and shows the policy, the treasury and its payout terms, and the settler
// with the policy key, through the real CLI against the real enclave process.

const POOL = "0x00000000000000000000000000000000000000aa";
const ALLOWED = ["0x1111111111111111111111111111111111111111", "0x3333333333333333333333333333333333333333"];
const PAY_TO = "0x2222222222222222222222222222222222222222";

describe("npm run enclave-policy (real CLI, real enclave)", () => {
  let enclave: EnclaveProcess;
  let client: RawEnclaveClient;
  let policyKey: string;
  let adminKey: string;

  const cli = async (args: string[], env: Record<string, string> = {}): Promise<ToolRun> => {
    const withSocket = env.AGENT_SIGNER_SVC_HSM_ENDPOINT ? args : [...args, "--socket", enclave.socketPath];
    return runTool("ops/enclave-policy.ts", withSocket, { env });
  };
  const sealed = async (): Promise<Record<string, unknown>> =>
    expectOk(await client.request("get_policy", {}));

  beforeAll(async () => {
    enclave = await startEnclaveProcess({ envId: "cli-env" });
    ({ client } = await RawEnclaveClient.connect(enclave.socketPath));
    policyKey = join(enclave.dir, "policy-authority.key");
    adminKey = join(enclave.dir, "admin-authority.key");
    await writeFile(policyKey, `${Buffer.from(enclave.policySecret).toString("hex")}\n`, { mode: 0o600 });
    await writeFile(adminKey, `${Buffer.from(enclave.adminSecret).toString("hex")}\n`, { mode: 0o600 });
  });
  afterAll(async () => {
    client?.close();
    await enclave?.dispose();
  });

  const FIRST = [
    "apply",
    "--per-tx",
    "10000000",
    "--daily",
    "100000000",
    "--fee-ceiling",
    "1000000000000000",
    "--allowlist",
    ALLOWED.join(","),
    "--x402-amount",
    "none",
    "--max-validity",
    "180",
    "--x402-margin",
    "6",
    "--x402-daily",
    "1000",
    "--settler-daily",
    "20000000",
    "--operator-pool",
    POOL,
  ];

  it("shows that no policy is sealed, as a table and as JSON, without a key", async () => {
    const table = await cli(["show"]);
    expect(table.code).toBe(0);
    expect(table.stdout).toContain("enclave cli-env on chain 77");
    expect(table.stdout).toMatch(/policy_version +0\n/);
    expect(table.stdout).toMatch(/policy +none sealed/);
    const json = await cli(["show", "--json"]);
    expect(JSON.parse(json.stdout)).toEqual({
      env_id: "cli-env",
      chain_id: 77,
      policy_version: 0,
      policy: null,
      treasury: null,
      settler: null,
      // Made at init (docs/x402.md#offers-and-receipts).
      payee: { payee_key_ref: expect.stringMatching(/^[0-9a-f]{64}$/), payee_address: expect.any(String) },
      node_frozen: false,
      node_freeze_epoch: 0,
      operator_keys: [],
      operator_passkeys: [],
      revoked_operator_keys: [],
    });
    expect(table.stdout).toMatch(/settler +none configured/);
  });

  it("refuses a first apply that does not name every field (exit 2), changing nothing", async () => {
    const run = await cli(["apply", "--policy-key", policyKey, "--per-tx", "5"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("missing --daily, --fee-ceiling, --allowlist, --x402-amount");
    expect(await sealed()).toMatchObject({ policy_version: 0, policy: null });
  });

  it("is refused by the enclave with the admin key (exit 1), changing nothing", async () => {
    const run = await cli([...FIRST, "--policy-key", adminKey]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("capability_rejected");
    expect(await sealed()).toMatchObject({ policy_version: 0, policy: null });
  });

  it("applies a first policy with the policy key, printing before and after", async () => {
    const run = await cli([...FIRST, "--policy-key", policyKey]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("policy applied, version 0 -> 1");
    expect(run.stdout).toMatch(/per_tx_limit_units +- +10000000 +\*\n/);
    expect(await sealed()).toMatchObject({
      policy_version: 1,
      policy: {
        per_tx_limit_units: "10000000",
        daily_limit_units: "100000000",
        fee_ceiling_wei: "1000000000000000",
        recipient_allowlist: ALLOWED,
        x402_amount_units: null,
        x402_pay_to: null,
        x402_max_timeout_seconds: 180,
        x402_validity_margin_seconds: 6,
        x402_daily_limit: 1000,
        settler_daily_fee_units: "20000000",
        operator_pool: POOL,
      },
    });
  });

  it("changes only the fields a later apply names, reading the socket from AGENT_SIGNER_SVC_HSM_ENDPOINT", async () => {
    const run = await cli(["apply", "--policy-key", policyKey, "--daily", "200000000", "--json"], {
      AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
    });
    expect(run.code).toBe(0);
    const { before, after } = JSON.parse(run.stdout) as {
      before: { policy_version: number; policy: Record<string, unknown> };
      after: { policy_version: number; policy: Record<string, unknown> };
    };
    expect([before.policy_version, after.policy_version]).toEqual([1, 2]);
    expect(after.policy).toEqual({ ...before.policy, daily_limit_units: "200000000" });
  });

  it("sets x402 amount and payTo together and clears both with --x402-amount none", async () => {
    const alone = await cli(["apply", "--policy-key", policyKey, "--x402-amount", "10000"]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain("set together");
    const both = await cli([
      "apply",
      "--policy-key",
      policyKey,
      "--x402-amount",
      "10000",
      "--x402-pay-to",
      PAY_TO,
    ]);
    expect(both.code).toBe(0);
    expect(await sealed()).toMatchObject({ policy: { x402_amount_units: "10000", x402_pay_to: PAY_TO } });
    const cleared = await cli([
      "apply",
      "--policy-key",
      policyKey,
      "--x402-amount",
      "none",
      "--allowlist",
      "none",
    ]);
    expect(cleared.code).toBe(0);
    expect(await sealed()).toMatchObject({
      policy_version: 4,
      policy: {
        x402_amount_units: null,
        x402_pay_to: null,
        recipient_allowlist: null,
        daily_limit_units: "200000000",
      },
    });
  });

  it("makes the x402 settler with the policy key once, shows it, and keeps it on a second run", async () => {
    const refused = await cli(["settler", "--policy-key", adminKey]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("capability_rejected");
    expect(await sealed()).toMatchObject({ settler: null });
    const flagged = await cli(["settler", "--policy-key", policyKey, "--budget", "5"]);
    expect(flagged.code).toBe(2);
    expect(flagged.stderr).toContain("settler takes no --budget");

    const made = await cli(["settler", "--policy-key", policyKey]);
    expect(made.stderr).toBe("");
    expect(made.code).toBe(0);
    expect(made.stdout).toContain("settler configured");
    const { settler } = (await sealed()) as { settler: { settler_address: string; settler_key_ref: string } };
    expect(settler.settler_address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(made.stdout).toMatch(new RegExp(`settler\\.address +- +${settler.settler_address} +\\*\\n`));

    // Idempotent: the same key, nothing changed, said so.
    const again = await cli(["settler", "--policy-key", policyKey, "--json"]);
    expect(again.code).toBe(0);
    const { before, after } = JSON.parse(again.stdout) as { before: unknown; after: unknown };
    expect(after).toEqual(before);
    expect((after as { settler: unknown }).settler).toEqual(settler);
    const twice = await cli(["settler", "--policy-key", policyKey]);
    expect(twice.stdout).toContain("settler already configured");

    const shown = await cli(["show"]);
    expect(shown.stdout).toMatch(new RegExp(`settler\\.address +${settler.settler_address}\\n`));
    expect(shown.stdout).toMatch(new RegExp(`settler\\.key_ref +${settler.settler_key_ref}\\n`));
    expect(shown.stdout).toMatch(/settler\.fee_spent_today_units +0\n/);
  }, 120_000); // seven CLI runs, each a fresh node process: seconds apiece on a loaded host

  it("points the settler at a named key of the settler namespace, and refuses a key of another", async () => {
    const batch = await privileged(client, enclave, "generate_keys", {
      namespace: "settler",
      count: 1,
      batch_id: "restored-settler",
    });
    const [restored] = batch.keys as Array<{ key_ref: string; address: string }>;
    const pointed = await cli(["settler", "--policy-key", policyKey, "--settler-key-ref", restored!.key_ref]);
    expect(pointed.stderr).toBe("");
    expect(pointed.code).toBe(0);
    expect(pointed.stdout).toContain("settler pointed at another key");
    expect(await sealed()).toMatchObject({
      settler: { settler_key_ref: restored!.key_ref, settler_address: restored!.address },
    });
    const agents = await privileged(client, enclave, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "not-a-settler",
    });
    const [agent] = agents.keys as Array<{ key_ref: string }>;
    const refused = await cli(["settler", "--policy-key", policyKey, "--settler-key-ref", agent!.key_ref]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("key_purpose_mismatch");
    expect(await sealed()).toMatchObject({ settler: { settler_key_ref: restored!.key_ref } });
  }, 120_000);

  it("keeps the x402 payee key init made, points the payee at a named key of the payee namespace, and refuses a key of another", async () => {
    const made = (await sealed()) as { payee: { payee_key_ref: string; payee_address: string } };
    const kept = await cli(["payee", "--policy-key", policyKey, "--json"]);
    expect(kept.stderr).toBe("");
    expect(kept.code).toBe(0);
    expect((JSON.parse(kept.stdout) as { after: { payee: unknown } }).after.payee).toEqual(made.payee);

    // A restored payee key (here: one generated in the namespace) keeps its address as payTo.
    const batch = await privileged(client, enclave, "generate_keys", {
      namespace: "payee",
      count: 1,
      batch_id: "restored-payee",
    });
    const [restored] = batch.keys as Array<{ key_ref: string; address: string }>;
    const pointed = await cli(["payee", "--policy-key", policyKey, "--payee-key-ref", restored!.key_ref]);
    expect(pointed.stderr).toBe("");
    expect(pointed.code).toBe(0);
    expect(pointed.stdout).toContain(`payee ${restored!.address}`);
    expect(await sealed()).toMatchObject({
      payee: { payee_key_ref: restored!.key_ref, payee_address: restored!.address },
    });
    const others = await privileged(client, enclave, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "not-a-payee",
    });
    const [other] = others.keys as Array<{ key_ref: string }>;
    const refused = await cli(["payee", "--policy-key", policyKey, "--payee-key-ref", other!.key_ref]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("key_purpose_mismatch");
    expect(await sealed()).toMatchObject({ payee: { payee_key_ref: restored!.key_ref } });
    const shown = await cli(["show"]);
    expect(shown.stdout).toMatch(new RegExp(`payee\\.address +${restored!.address}\\n`));
  }, 120_000);

  it("changes the x402 margin and daily count alone, and shows them", async () => {
    const run = await cli(["apply", "--policy-key", policyKey, "--x402-margin", "10", "--x402-daily", "500"]);
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(/x402_validity_margin_seconds +6 +10 +\*\n/);
    expect(run.stdout).toMatch(/x402_daily_limit +1000 +500 +\*\n/);
    expect(await sealed()).toMatchObject({
      policy: { x402_validity_margin_seconds: 10, x402_daily_limit: 500 },
    });
    const shown = await cli(["show"]);
    expect(shown.stdout).toMatch(/x402_validity_margin_seconds +10\n/);
    expect(shown.stdout).toMatch(/x402_daily_limit +500\n/);
    const tooLong = await cli(["apply", "--policy-key", policyKey, "--x402-margin", "601"]);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toContain("--x402-margin must be a whole number from 0 to 600");
  });

  it("changes the settler's daily fee budget alone, and shows it", async () => {
    const run = await cli(["apply", "--policy-key", policyKey, "--settler-daily", "5000000"]);
    // Mutation: parsing --settler-daily without setting the field fails this (exit 2, nothing to apply).
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(/settler_daily_fee_units +20000000 +5000000 +\*\n/);
    expect(await sealed()).toMatchObject({ policy: { settler_daily_fee_units: "5000000" } });
    const shown = await cli(["show"]);
    expect(shown.stdout).toMatch(/settler_daily_fee_units +5000000\n/);
  });

  it("seals the node's x402 ceiling and its payees, shows them, and clears them with none and any", async () => {
    const payee = "0x4444444444444444444444444444444444444444";
    const run = await cli([
      "apply",
      "--policy-key",
      policyKey,
      "--x402-max-per-payment",
      "1000000",
      "--x402-payees",
      payee,
    ]);
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(/x402_max_per_payment_units +none \(the x402 pair alone\) +1000000 +\*\n/);
    expect(await sealed()).toMatchObject({
      policy: { x402_max_per_payment_units: "1000000", x402_payees: [payee] },
    });
    const shown = await cli(["show"]);
    expect(shown.stdout).toMatch(new RegExp(`x402_payees +${payee}\n`));
    const cleared = await cli([
      "apply",
      "--policy-key",
      policyKey,
      "--x402-max-per-payment",
      "none",
      "--x402-payees",
      "any",
    ]);
    expect(cleared.stderr).toBe("");
    const policy = ((await sealed()) as { policy: Record<string, unknown> }).policy;
    expect(policy.x402_max_per_payment_units).toBeUndefined();
    expect(policy.x402_payees).toBeUndefined();
  });

  it("configures the treasury and its payout terms with the policy key, keeps unnamed terms, and refuses a bad flag with exit 2", async () => {
    const partial = await cli([
      "treasury",
      "--policy-key",
      policyKey,
      "--budget",
      "1000000000",
      "--payout",
      "5",
    ]);
    expect(partial.code).toBe(2);
    expect(partial.stderr).toContain("missing --cooldown-ms, --payout-daily");
    expect(await sealed()).toMatchObject({ treasury: null });
    const run = await cli([
      "treasury",
      "--policy-key",
      policyKey,
      "--budget",
      "1000000000",
      "--payout",
      "1000000",
      "--cooldown-ms",
      "60000",
      "--payout-daily",
      "10000000",
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/treasury\.budget_units +- +1000000000 +\*\n/);
    expect(run.stdout).toMatch(/treasury\.payout_units +- +1000000 +\*\n/);
    expect(run.stdout).toMatch(/treasury\.cooldown_ms +- +60000 +\*\n/);
    expect(run.stdout).toMatch(/treasury\.daily_limit_units +- +10000000 +\*\n/);
    expect(await sealed()).toMatchObject({
      treasury: {
        budget_units: "1000000000",
        spent_units: "0",
        payout_units: "1000000",
        cooldown_ms: 60000,
        daily_limit_units: "10000000",
      },
    });
    const again = await cli([
      "treasury",
      "--policy-key",
      policyKey,
      "--budget",
      "2000",
      "--cooldown-ms",
      "0",
    ]);
    expect(again.code).toBe(0);
    expect(await sealed()).toMatchObject({
      treasury: {
        budget_units: "2000",
        payout_units: "1000000",
        cooldown_ms: 0,
        daily_limit_units: "10000000",
      },
    });
    // The full set of refused flags is in ops/lib/policy-cli-args.test.ts; one through the CLI here.
    const bad = await cli(["apply", "--policy-key", policyKey, "--per-tx", "1.5"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--per-tx must be a whole number");
  });
});
