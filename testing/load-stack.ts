/**
 * The set-up every fault-under-load test shares: a money stack with no in-process origin (the
 * origins under test are processes), funded agents, free keys and an open registration policy for
 * registrations under load, the mix of requests the driver sends, and the audit at the end.
 */
import { randomBytes } from "node:crypto";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { updateRegistrationPolicy } from "../origin/registration/policy-repository.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import type { HeldSocket } from "./held-socket.ts";
import { auditLoad, type LoadAudit } from "./load-audit.ts";
import {
  faucetKind,
  type LoadAgent,
  type LoadDriver,
  type RequestKind,
  readKinds,
  registerKind,
  startLoadDriver,
  transferKind,
} from "./load-driver.ts";
import { type MoneyStack, type MoneyStackOptions, type StackAgent, startMoneyStack } from "./money-stack.ts";
import { type OriginProcess, spawnOrigin } from "./origin-process.ts";

export type LoadStack = {
  stack: MoneyStack;
  agents: StackAgent[];
  /**
   * Starts an origin process (origin/main.ts, workers included) on the stack, env overrides
   * applied, on a port of its own or on a socket held as a supervisor holds one.
   */
  spawnOrigin(env?: Record<string, string>, socket?: HeldSocket): Promise<OriginProcess>;
  /** Starts the load against `base`; `extraKinds` join the mix (x402 payments, say). */
  startLoad(
    base: string | (() => string),
    options?: { loops?: number; extraKinds?: RequestKind[] },
  ): LoadDriver;
  /** Audits the rows and the chain after the load (testing/load-audit.ts). */
  audit(driver: LoadDriver): Promise<LoadAudit>;
  close(): Promise<void>;
};

const AGENT_UNITS = 1_000_000n;

export async function startLoadStack(
  options: { agents?: number; freeKeys?: number } & Pick<MoneyStackOptions, "database"> = {},
): Promise<LoadStack> {
  const started = Date.now();
  const progress = (what: string): void =>
    void process.stderr.write(`load stack: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  const edgeSecret = randomBytes(32).toString("hex");
  const stack = await startMoneyStack({
    database: options.database,
    inProcessOrigin: false,
    env: {
      // Small payouts, no cooldown: the faucet signs under load instead of answering 429.
      AGENT_FAUCET_PAYOUT_AMOUNT: "1000",
      AGENT_FAUCET_COOLDOWN_MS: "0",
      AGENT_FAUCET_DAILY_LIMIT: "100000000",
      AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
      AGENT_EDGE_SHARED_SECRET: edgeSecret,
      AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
      // The identity sweep re-proves every identity each second, so it runs through the fault.
      IDENTITY_SWEEP_PERIOD_SECONDS: "1",
      IDENTITY_SWEEP_WINDOW_SECONDS: "1",
      CHAIN_RPC_TIMEOUT_MS: "1000",
    },
  });
  progress("money stack up");
  const agents = await stack.newAgents(options.agents ?? 4, { units: AGENT_UNITS });
  // Registrations under load must not reach the verified-key reserve (10) across the file's tests:
  // its 503 key_reserve is a right answer, but not the fault under test.
  await stack.addFreeKeys(options.freeKeys ?? 80);
  progress("agents and free keys made");
  await updateRegistrationPolicy(stack.db.handle.db, {
    changes: {
      paused: false,
      keyReserve: 0,
      perIpDaily: 1000,
      networkDaily: 100_000,
      totalCeiling: 100_000,
      attemptsPerIpPerMinute: 1000,
      attemptsGlobalPerMinute: 100_000,
    },
    reason: "fault tests: registrations under load",
  });
  const chain = publicClientFor(stack.devnet.url);
  const treasuryWei = await chain.getBalance({ address: stack.treasury });
  const recipients = Array.from({ length: 3 }, () => newAccount().address);
  let next = 0;
  const loadAgents: LoadAgent[] = agents.map((agent) => ({
    token: agent.token,
    agentId: agent.agentId,
    wallet: agent.wallet,
  }));
  return {
    stack,
    agents,
    spawnOrigin: (env = {}, socket) => spawnOrigin({ env: stack.processEnv(env), socket }),
    startLoad: (base, loadOptions = {}) =>
      startLoadDriver({
        base,
        agents: loadAgents,
        loops: loadOptions.loops ?? 6,
        pauseMs: 40,
        kinds: [
          ...readKinds(),
          transferKind({ to: () => recipients[next++ % recipients.length]!, amountUnits: 100n }),
          faucetKind(),
          registerKind({ edgeSecret, weight: 0.5 }),
          ...(loadOptions.extraKinds ?? []),
        ],
      }),
    audit: (driver) =>
      auditLoad({
        db: stack.db.handle.db,
        chainUrl: stack.devnet.url,
        driver,
        agents: agents.map((agent) => ({
          agentId: agent.agentId,
          wallet: agent.wallet,
          fundedWei: AGENT_UNITS * WEI_PER_UNIT,
        })),
        treasury: { address: stack.treasury, balanceWei: treasuryWei },
      }),
    close: () => stack.close(),
  };
}
