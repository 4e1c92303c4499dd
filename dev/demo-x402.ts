/**
 * `npm run demo:x402` (docs/x402.md): pays the demo resource of a running stack with nothing but
 * an agent token: 402 → POST /x402/authorize → the paid retry with PAYMENT-SIGNATURE → 200, then
 * the transaction's receipt and the balance it moved. An agent with less than the price first
 * takes a faucet payout.
 *
 *   AGENT_TOKEN=agt_… AGENT_BASE_URL=http://127.0.0.1:8787/77 npm run demo:x402
 *
 * The token and the base URL come from the environment, as the agent CLI and the MCP server read
 * them: an argument would be echoed by npm and shown by `ps`, so any argument is refused, and
 * there is no default base that could send the token to another stack. Exit 0 paid, 1 failed,
 * 2 usage.
 */
import { randomBytes } from "node:crypto";
import { errorMessage } from "../shared/error-message.ts";
import { sleep } from "../shared/sleep.ts";
import { payWithToken } from "./x402-token-payer.ts";

const USAGE =
  "usage: AGENT_TOKEN=agt_… AGENT_BASE_URL=http://127.0.0.1:8787/77 npm run demo:x402 (no arguments)";

if (process.argv.length > 2) {
  // The argument is never echoed: it may be the token.
  process.stderr.write(
    "demo:x402: takes no arguments; give the token in AGENT_TOKEN (an argument is echoed by npm and shown by ps)\n" +
      `${USAGE}\n`,
  );
  process.exit(2);
}
const token = process.env.AGENT_TOKEN;
const base = process.env.AGENT_BASE_URL?.replace(/\/+$/, "");
if (!token || !base) {
  process.stderr.write(`demo:x402: set ${!token ? "AGENT_TOKEN" : "AGENT_BASE_URL"}\n${USAGE}\n`);
  process.exit(2);
}

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

async function agentGet<T>(path: string): Promise<T> {
  const response = await fetch(`${base}/agent/v1${path}`, { headers: { authorization: `Bearer ${token}` } });
  if (response.status !== 200)
    throw new Error(`GET ${path} answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as T;
}

async function agentPost<T>(path: string, body: unknown): Promise<{ status: number; body: T }> {
  const response = await fetch(`${base}/agent/v1${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as T };
}

const balance = async (): Promise<bigint> =>
  BigInt((await agentGet<{ balance: string }>("/balance")).balance);

/** A faucet payout, followed to `confirmed`, when the wallet holds less than `needed` units. */
async function fundIfNeeded(needed: bigint): Promise<void> {
  const held = await balance();
  if (held >= needed) return;
  say(`the wallet holds ${held} units, less than ${needed}: POST ${base}/agent/v1/faucet`);
  const payout = await agentPost<{ action_id?: string; error?: { code: string; message: string } }>(
    "/faucet",
    {
      idempotency_key: `demo-x402-${randomBytes(8).toString("hex")}`,
    },
  );
  if (!payout.body.action_id) throw new Error(`the faucet refused: ${JSON.stringify(payout.body)}`);
  for (let tries = 0; ; tries++) {
    const action = await agentGet<{ status: string }>(`/actions/${payout.body.action_id}`);
    if (action.status === "confirmed") break;
    if (action.status === "failed" || action.status === "reverted" || tries > 300)
      throw new Error(`the faucet payout ended ${action.status}`);
    await sleep(100);
  }
  say(`  payout ${payout.body.action_id} confirmed`);
}

async function main(base: string, token: string): Promise<void> {
  say(`demo:x402 against ${base}`);
  const network = await agentGet<{ agent: { assigned_wallet: string } }>("/network");
  say(`agent wallet ${network.agent.assigned_wallet}`);
  // The price, from the quote itself, so the faucet tops up only what this payment needs.
  const quote = (await (await fetch(`${base}/x402/demo`)).json()) as { accepts?: Array<{ amount?: string }> };
  await fundIfNeeded(BigInt(quote.accepts?.[0]?.amount ?? "0"));
  const before = await balance();
  const paid = await payWithToken({ base, token, step: say });
  if (paid.status !== 200 || !paid.settlement?.success || !paid.settlement.transaction) {
    throw new Error(`the paid retry answered ${paid.status}: ${paid.body}`);
  }
  say(`  body: ${paid.body}`);
  const receipt = await agentPost<{ result?: { status?: string; blockNumber?: string } }>("/rpc", {
    jsonrpc: "2.0",
    id: 1,
    method: "eth_getTransactionReceipt",
    params: [paid.settlement.transaction],
  });
  say(
    `transaction ${paid.settlement.transaction}: receipt status ${receipt.body.result?.status}, block ${receipt.body.result?.blockNumber}`,
  );
  const after = await balance();
  say(`balance ${before} → ${after} units (paid ${before - after}, the quote asked ${paid.quote.amount})`);
}

main(base, token).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`demo:x402: ${errorMessage(error)}\n`);
    process.exit(1);
  },
);
