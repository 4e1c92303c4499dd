import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "@hono/node-server";
import { x402Facilitator } from "@x402/core/facilitator";
import type { FacilitatorClient } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmFacilitator } from "@x402/evm/exact/facilitator";
import { ExactEvmScheme as ExactEvmServer } from "@x402/evm/exact/server";
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { paymentMiddleware, x402ResourceServer } from "@x402/hono";
import { Hono } from "hono";
import { type Address, createWalletClient, type Hex, http, publicActions } from "viem";
import { nonceManager } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PolicyDenied } from "../../../client/errors.ts";
import { createGatewayClient } from "../../../client/index.ts";
import { devnetChain, fund, newAccount, publicClientFor } from "../../../devnet/testing.ts";
import { enrolledOperator, type Operator } from "../../../enclave/testing/agent-policy.ts";
import { mintFor } from "../../../enclave/testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "../../../enclave/testing/raw-client.ts";
import type { AgentPolicyDocument } from "../../../shared/agent-policy.ts";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../../shared/constants.ts";
import { agentPolicySubject } from "../../../shared/operator-approval.ts";
import type { StackAgent } from "../../../testing/agent-factory.ts";
import { useStackEdge } from "../../../testing/edge.ts";
import { runTool, type ToolRun } from "../../../testing/run-tool.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { officialFacilitatorSigner } from "../../../testing/x402-official-client.ts";
import { fundedPayer } from "../../../testing/x402-payer.ts";
import { SELLER_EXTRA } from "../../../testing/x402-quote.ts";
import { writeAgentPolicy } from "../../policy/store.ts";

// One x402 path for many sellers, end to end through the edge (Miniflare) in front of the real
// origin, enclave, devnet and Postgres: two sellers that are plain x402 resource servers
// (`@x402/hono`'s middleware, the official facilitator settling on the devnet), an agent whose
// policy lists both paying through our client's fetchWithPayment and the agent CLI, and the
// official `@x402/fetch` client paying the same sellers unchanged.

const EDGE_SECRET = `policy-edge-${randomBytes(24).toString("hex")}`;
const PAIR = newAccount().address.toLowerCase() as Address;
const SELLER_A = newAccount().address.toLowerCase() as Address;
const SELLER_B = newAccount().address.toLowerCase() as Address;
const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../cli/agent-wallet.mjs");

type Seller = { url: string; close(): Promise<void> };

/** A seller's resource at `amount` units to `payTo`, paid through the official facilitator on the devnet. */
async function startSeller(devnetUrl: string, payTo: Address, amount: bigint): Promise<Seller> {
  const account = newAccount();
  await fund(devnetUrl, account.address, 10n ** 18n);
  const wallet = createWalletClient({
    account: { ...account, nonceManager },
    chain: devnetChain(devnetUrl),
    transport: http(devnetUrl, { retryCount: 0 }),
    pollingInterval: 100,
  }).extend(publicActions);
  const signer = officialFacilitatorSigner(wallet);
  const facilitator = new x402Facilitator().register(CAIP2_NETWORK, new ExactEvmFacilitator(signer));
  const server = new x402ResourceServer(facilitator as unknown as FacilitatorClient).register(
    CAIP2_NETWORK,
    new ExactEvmServer(),
  );
  const app = new Hono();
  app.use(
    paymentMiddleware(
      {
        "GET /item": {
          accepts: {
            scheme: "exact",
            network: CAIP2_NETWORK,
            payTo,
            price: {
              amount: amount.toString(),
              asset: NATIVE_TRANSFER_AUTH_ADDRESS,
              extra: { ...SELLER_EXTRA },
            },
            maxTimeoutSeconds: 60,
          },
          description: "a seller's item",
          mimeType: "application/json",
        },
      },
      server,
    ),
  );
  app.get("/item", (c) => c.json({ item: payTo }));
  const listening = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 });
  await new Promise<void>((resolve) => listening.once("listening", () => resolve()));
  const { port } = listening.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/item`,
    close: () => new Promise<void>((resolve) => listening.close(() => resolve())),
  };
}

describe("one x402 path for many sellers, through the edge (real stack)", { timeout: 180_000 }, () => {
  const stack = useMoneyStack(
    {
      x402: { amountUnits: 10_000n, payTo: PAIR },
      policy: { x402MaxPerPaymentUnits: 1_000_000n, x402Payees: null },
      env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
    },
    { timeoutMs: 180_000 },
  );
  const edge = useStackEdge(stack, EDGE_SECRET);
  let base: string;
  let sellerA: Seller;
  let sellerB: Seller;
  let enclave: RawEnclaveClient;
  let operator: Operator;
  const chain = () => publicClientFor(stack.devnet.url);

  beforeAll(async () => {
    base = `${edge.url}/77`;
    sellerA = await startSeller(stack.devnet.url, SELLER_A, 40_000n);
    sellerB = await startSeller(stack.devnet.url, SELLER_B, 20_000n);
    ({ client: enclave } = await RawEnclaveClient.connect(stack.enclave.socketPath));
    operator = await enrolledOperator(enclave, stack.enclave, "edge-test-operator");
  }, 180_000);
  afterAll(async () => {
    enclave?.close();
    await sellerA?.close();
    await sellerB?.close();
  });

  /** The policy the enclave holds for the agent now, or null for none. */
  const sealedPolicyOf = async (agent: StackAgent) =>
    expectOk(await enclave.request("get_agent_policy", { key_ref: agent.keyRef }))
      .policy as AgentPolicyDocument | null;
  /** Seals the agent's policy in the enclave (an operator approves: it loosens) and stores it as the origin does. */
  const setPolicy = async (agent: StackAgent, document: AgentPolicyDocument) => {
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
    await writeAgentPolicy(stack.db.handle.db, {
      agentId: agent.agentId,
      before: null,
      after: document,
      version: sealed.version as number,
      changedBy: { by: "operator", operatorKeyId: operator.keyId },
    });
  };
  const cli = (args: string[], token: string): Promise<ToolRun> =>
    runTool(BIN, args, {
      env: { AGENT_BASE_URL: base, AGENT_TOKEN: token },
      cleanEnv: true,
      timeoutMs: 90_000,
    });

  it("an agent whose policy lists A (≤ 50,000) and B (≤ 10,000) pays A 40,000, is refused 20,000 to B naming B's limit, and once its day's units are spent the next authorization", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    await setPolicy(agent, {
      x402: {
        payees: [
          { pay_to: SELLER_A, per_payment_units: "50000" },
          { pay_to: SELLER_B, per_payment_units: "10000" },
        ],
        daily_units: "60000",
      },
    });
    const client = createGatewayClient({ baseUrl: base, token: agent.token });

    // A: our client's fetchWithPayment, through the edge, settled on chain by A's facilitator.
    const before = await chain().getBalance({ address: agent.wallet });
    const paid = await client.fetchWithPayment(sellerA.url);
    expect(paid.status).toBe(200);
    expect(await paid.json()).toEqual({ item: SELLER_A });
    const settlement = decodePaymentResponseHeader(paid.headers.get("PAYMENT-RESPONSE")!);
    expect(settlement).toMatchObject({ success: true, network: CAIP2_NETWORK });
    expect((await chain().getTransactionReceipt({ hash: settlement.transaction as Hex })).status).toBe(
      "success",
    );
    expect(before - (await chain().getBalance({ address: agent.wallet }))).toBe(40_000n * WEI_PER_UNIT);
    expect(await chain().getBalance({ address: SELLER_A })).toBe(40_000n * WEI_PER_UNIT);

    // B: 20,000 over its 10,000 per payment. The client's typed error; the CLI's own exit code.
    const refused = await client.fetchWithPayment(sellerB.url).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PolicyDenied);
    expect((refused as PolicyDenied).rule).toBe(`x402.payees[${SELLER_B}].per_payment_units`);
    expect((refused as PolicyDenied).remaining).toBe("10000");
    const refusedCli = await cli(["pay", sellerB.url], agent.token);
    expect(refusedCli.code).toBe(PolicyDenied.exitCode);
    expect(refusedCli.stderr).toContain(`x402.payees[${SELLER_B}].per_payment_units`);
    expect(await chain().getBalance({ address: SELLER_B })).toBe(0n);

    // A again, a second purchase (its own key; without one, the same quote is the first payment's
    // retry): 40,000 over the 20,000 left of the day's 60,000.
    const spent = await cli(["pay", sellerA.url, "--key", "second-purchase-of-a"], agent.token);
    expect(spent.code).toBe(PolicyDenied.exitCode);
    expect(spent.stderr).toContain("x402.daily_units");
    expect(await chain().getBalance({ address: SELLER_A })).toBe(40_000n * WEI_PER_UNIT);
    for (const output of [refusedCli.stdout, refusedCli.stderr, spent.stdout, spent.stderr]) {
      expect(output).not.toContain(agent.token);
    }
  });

  it("the official @x402/fetch client pays the same sellers unchanged, from its own funded account", async () => {
    const payer = await fundedPayer(stack.devnet.url);
    const official = x402Client.fromConfig({
      schemes: [{ network: CAIP2_NETWORK, client: new ExactEvmScheme(payer) }],
      spendControls: {
        allowedAssets: [
          { network: CAIP2_NETWORK, asset: NATIVE_TRANSFER_AUTH_ADDRESS, maxAmountPerPayment: "50000" },
        ],
      },
    });
    const before = await chain().getBalance({ address: SELLER_B });
    const response = await wrapFetchWithPayment(fetch, official)(sellerB.url);
    expect(response.status).toBe(200);
    expect(decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!)).toMatchObject({
      success: true,
    });
    expect((await chain().getBalance({ address: SELLER_B })) - before).toBe(20_000n * WEI_PER_UNIT);
  });
});
