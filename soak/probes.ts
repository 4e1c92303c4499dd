/**
 * Limit probes that run once beside the mix, each on its own agent so that nothing else spends its
 * budget: a transfer at the per-transaction limit, transfers until the daily limit refuses, and a
 * burst of requests past the per-agent rate limit.
 */
import { randomBytes } from "node:crypto";
import type { Address } from "viem";
import { PER_AGENT_REQUESTS } from "../origin/gateway/limits.ts";
import type { Answer, EdgeClient } from "./edge-client.ts";
import type { SoakAgent } from "./kinds.ts";
import type { LimitObservations } from "./limits.ts";

type Record = (kind: string, answer: Answer) => void;

const transfer = (edge: EdgeClient, from: SoakAgent, to: Address, units: bigint): Promise<Answer> =>
  edge.request("/agent/v1/transfers", {
    token: from.token,
    json: { idempotency_key: `soak-probe-${randomBytes(12).toString("hex")}`, to, amount: units.toString() },
  });

const describeRefusal = (answer: Answer): string | undefined => {
  const error = (answer.body as { error?: { limit?: string; remaining_units?: string } } | undefined)?.error;
  return error?.limit ? `${error.limit}, ${error.remaining_units ?? "?"} units left` : undefined;
};

/**
 * The per-transaction limit counts value plus the maximum fee, so a transfer of exactly
 * the limit is refused; then transfers of 90 % of the per-transaction limit until the daily limit
 * refuses one (or something else ends them).
 */
export async function probeTransferLimits(params: {
  edge: EdgeClient;
  agent: SoakAgent;
  to: Address;
  perTxUnits: bigint;
  limits: LimitObservations;
  record: Record;
}): Promise<void> {
  const { edge, agent, to, perTxUnits, limits, record } = params;
  const atLimit = await transfer(edge, agent, to, perTxUnits);
  record("transfer (limit probe)", atLimit);
  limits.perTransaction = { status: atLimit.status, code: atLimit.code, detail: describeRefusal(atLimit) };
  const units = (perTxUnits * 9n) / 10n;
  for (let i = 0; i < 100; i++) {
    const answer = await transfer(edge, agent, to, units);
    record("transfer (limit probe)", answer);
    if (answer.status === 200 || answer.status === 202) {
      limits.dailyAccepted++;
      limits.dailyAcceptedUnits += units;
      continue;
    }
    limits.dailyRefusal = { status: answer.status, code: answer.code, detail: describeRefusal(answer) };
    return;
  }
}

/** The limit and ten more requests from one agent, eight at a time. */
export async function probeRequestRate(params: {
  edge: EdgeClient;
  agent: SoakAgent;
  limits: LimitObservations;
  record: Record;
}): Promise<void> {
  const { edge, agent, limits, record } = params;
  let left = PER_AGENT_REQUESTS.limit + 10;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (left-- > 0) {
        const sent = Date.now();
        const answer = await edge.request("/agent/v1/network", { token: agent.token });
        record("network (rate probe)", answer);
        if (answer.status === 200) limits.burstAccepted.push({ sent, answered: Date.now() });
        if (answer.status === 429) limits.burstRefused++;
      }
    }),
  );
}
