/**
 * The one place the origin is assembled, used by main.ts, the test harness
 * (testing/origin.ts), the crash child (testing/money-crash-origin.ts) and the gateway
 * bench (bench/gateway-server.ts), each of which opens its infrastructure with
 * open-infrastructure.ts.
 *
 * Four layers, each importing only the ones below it:
 *   - the infrastructure (infrastructure.ts): the configuration, the database, the chain clients,
 *     the signer client, the logger, the clock and the metrics; opened by the caller, which also
 *     closes them. It names no capability. A test that needs a fault the real parts cannot produce
 *     wraps one of these clients before handing them over (the crash child's upstream that kills
 *     its process around a broadcast); no production type carries a test hook.
 *   - the capabilities (capability.ts), each in its own folder and of one shape: the routers it
 *     mounts under BASE_PATH, the workers it runs, what it drains at shutdown. health and console
 *     always; money (the faucet and transfers, and the transaction tracker); with the gateway
 *     switch on, registration, openapi, gateway (which mounts the write routes money and x402 hand
 *     it) and x402; keypool and identity. Workers start only with the gateway switch on
 *     (docs/api.md#the-switches). Each route a capability registers is a descriptor of
 *     openapi/operations.ts (openapi/route.ts).
 *   - the start-up checks (startup/), whatever the gateway switch: the enclave holds the keys the
 *     database assigns (when the infrastructure can ask, keysHeld), whether it holds the stored
 *     spending policies (policiesHeld: a warning only), then the money switches
 *     against the enclave's sealed policy; a failed check is the list of reasons the origin
 *     refuses to start with. A check builds nothing.
 *   - this root, which runs the start-up checks, builds the node's one outbox (outbox/outbox.ts)
 *     from every domain's parts (OUTBOX_DOMAINS) and the money and x402 runtimes over it, the
 *     node-local state the capabilities share (the gateway's limiters and the registration's early
 *     limiter, shown by the console; the metrics), the capabilities in dependency order, and the
 *     app (app.ts) from their routes in mount order.
 *
 * Serving, signals and closing the infrastructure stay with the caller: main.ts listens on its
 * port or inherited socket and exits on a signal; a test listens on a free port.
 */
import { errorMessage } from "../shared/error-message.ts";
import { err, ok, type Result } from "../shared/result.ts";
import { abandonRequestedSweep } from "./actions/abandon.ts";
import { createMoneyModule, type MoneyModule } from "./actions/capability.ts";
import type { MoneyRuntime } from "./actions/money-runtime.ts";
import { actionsFollower, agentFillerRows, agentWalletKeys } from "./actions/outbox-follower.ts";
import { transferChecks } from "./actions/transfer-checks.ts";
import { expireHoldsSweep } from "./agent-actions/holds.ts";
import { createApp } from "./app.ts";
import type { Capability, CapabilityName, StartupCheckName } from "./capability.ts";
import { createFeeOracle } from "./chain/fees.ts";
import { createConsoleModule } from "./console/capability.ts";
import type { NodeLocal } from "./console/node-local.ts";
import { createEventsModule, type EventsModuleOptions } from "./events/capability.ts";
import { createGatewayModule } from "./gateway/capability.ts";
import { createGatewayLimiters, type GatewayLimiters } from "./gateway/limits.ts";
import { createHealthModule } from "./health.ts";
import { createIdentityModule } from "./identity/capability.ts";
import type { Infrastructure } from "./infrastructure.ts";
import { createKeyPoolModule } from "./keypool/capability.ts";
import { createOpenApiModule } from "./openapi/router.ts";
import { createOutbox, type OutboxDomains, type TxTrackerOptions } from "./outbox/index.ts";
import { createPolicyHandlers } from "./policy/capability.ts";
import type { PolicyChangeDeps } from "./policy/change.ts";
import { createRegistrationModule } from "./registration/capability.ts";
import { EarlyLimiter } from "./registration/early-limiter.ts";
import { createCapabilityMinter, readAuthoritySecret } from "./signer/capability-minter.ts";
import type { GetPolicyResult, SignerResult } from "./signer/types.ts";
import { checkKeysHeld } from "./startup/keys-held.ts";
import { type CheckedMoney, checkMoney } from "./startup/money-setup.ts";
import { warnPoliciesNotHeld } from "./startup/policies-held.ts";
import { createWebhooksModule, type WebhooksModuleOptions } from "./webhooks/capability.ts";
import { loadWebhookSigningKeys, type WebhookSigningKey } from "./webhooks/signing.ts";
import type { Worker } from "./workers/loop.ts";
import { createX402Module } from "./x402/capability.ts";
import { settledResourcesFollower } from "./x402/payee/catalogue-follower.ts";
import {
  reservationEndedFollower,
  reservationMinedFollower,
  settlementRevertsFollower,
  settlementsFollower,
} from "./x402/payee/outbox-follower.ts";
import { buildX402Runtime, type X402Runtime } from "./x402/setup.ts";

export type ComposeOptions = {
  /** Timings of the transaction tracker (tests shorten its grace periods). */
  tracker?: TxTrackerOptions;
  /** This node's gateway limiters; the standard tiers by default (the bench raises them). */
  limiters?: GatewayLimiters;
  /** The sealed policy, when the caller read it already (main.ts logs it first). */
  sealed?: SignerResult<GetPolicyResult>;
  /** The webhooks' address resolver (tests). */
  webhooks?: WebhooksModuleOptions;
  /** The event stream's timings (tests). */
  events?: EventsModuleOptions;
  /** How long a registration short of keys waits for the refill (registration/router.ts's KEY_WAIT_MS by default; tests). */
  keyWaitMs?: number;
  /**
   * What an x402 presentation held by another waits beyond the receipt wait
   * (x402/payee/earlier-presentation.ts HOLD_BEYOND_RECEIPT_MS by default; tests).
   */
  x402HoldBeyondReceiptMs?: number;
};

export type ComposedOrigin = {
  app: ReturnType<typeof createApp>;
  /** The infrastructure as the capabilities got it. */
  infrastructure: Infrastructure;
  /** In mount order. */
  capabilities: readonly Capability[];
  /** The money capability's runtime and tracker (tests read them). */
  money: MoneyModule;
  /**
   * Starts the workers of the named capabilities (all by default), once the server listens. With
   * the gateway switch off no worker starts.
   */
  start(only?: readonly CapabilityName[]): void;
  /** Ends the event streams (each told `shutting_down`), so the server's drain need not wait on them. */
  endStreams(): void;
  /** Drains each capability, then stops the workers; the caller closes the infrastructure after. */
  stop(): Promise<void>;
};

export async function composeOrigin(
  infra: Infrastructure,
  options: ComposeOptions = {},
): Promise<Result<ComposedOrigin, { code: StartupCheckName; errors: string[] }>> {
  const { config, clock, metrics } = infra;
  const node: NodeLocal = {
    // The gateway's tiers run on the system's time, the registration's early limiter on the
    // infrastructure's clock (its windows follow the quota clock).
    limiters: options.limiters ?? createGatewayLimiters(),
    earlyLimiter: new EarlyLimiter(() => clock.now().getTime()),
    refusals: metrics.refused,
    metrics,
    startedAt: clock.now(),
  };

  const keys = await checkKeysHeld(infra);
  if (!keys.ok) return err({ code: "keys", errors: keys.error });
  await warnPoliciesNotHeld(infra);
  // The start-up check of the money switches against the sealed policy, whatever the gateway switch.
  const checked = await checkMoney({
    config,
    signer: infra.signer,
    rpc: infra.rpc,
    sealed: options.sealed,
  });
  if (!checked.ok) return err({ code: "money", errors: checked.error });
  let webhookKeys: WebhookSigningKey[] = [];
  if (config.webhooks.signingKeyFile) {
    try {
      webhookKeys = await loadWebhookSigningKeys(config.webhooks.signingKeyFile);
    } catch (error) {
      return err({ code: "webhooks", errors: [(error as Error).message] });
    }
  }
  // The admin key is read when first needed (signer/capability-minter.ts), so a key file that
  // cannot serve (its mode open to group or others, not a seed) is refused here, at the start,
  // rather than by the key pool's refill and the policy routes once they run, in a log line.
  if (config.signer.endpoint && config.signer.adminAuthorityKeyFile) {
    try {
      await readAuthoritySecret(config.signer.adminAuthorityKeyFile);
    } catch (error) {
      return err({ code: "admin_key", errors: [errorMessage(error)] });
    }
  }
  const runtimes = buildMoney(infra, checked.value, options);
  const money = createMoneyModule(infra, runtimes?.money);

  // Built before registration, which wakes its refill and waits on it (keypool/demand.ts); its
  // workers still start with the others.
  const keyPool = createKeyPoolModule(infra);
  // The console's chart reads the service wallets the sealed policy names (none with money off).
  const sealedWallets = checked.value?.sealed;
  const capabilities: Capability[] = [
    createHealthModule(infra),
    createConsoleModule(infra, node, {
      treasury: sealedWallets?.treasury?.faucetAddress.toLowerCase(),
      settler: sealedWallets?.settler?.settlerAddress.toLowerCase(),
    }),
  ];
  // With the gateway switch off nothing of the gateway is built: every /agent/v1/* path falls
  // through to the 404 (docs/api.md#the-switches).
  if (config.gatewayEnabled) {
    const x402 = createX402Module(infra, node.refusals, runtimes?.x402);
    const policy = createPolicyHandlers({
      db: infra.database.db,
      clock,
      change: policyChangeDeps(infra, checked.value),
      transfers:
        runtimes && config.features.transfers
          ? transferChecks(runtimes.money, config.transfers.recipientAllowlist)
          : undefined,
      x402Decision: x402.x402PolicyDecision,
    });
    const events = createEventsModule(infra, options.events);
    capabilities.push(
      // Registered first: Hono runs matching handlers in registration order, so the register route
      // answers before the gateway's `*` middleware (client IP, bearer auth) would run.
      createRegistrationModule(infra, node, keyPool.demand, { keyWaitMs: options.keyWaitMs }),
      createOpenApiModule(config.http.basePath),
      createGatewayModule(infra, node, { ...money.writes, ...x402.writes, policy }, events.handlers),
      // The demo resource and the facilitator: public, present when x402 is on.
      x402.capability,
      events.capability,
      // The public key route and the delivery workers.
      createWebhooksModule(infra, webhookKeys, events.feed, options.webhooks),
    );
  }
  capabilities.push(keyPool.capability, createIdentityModule(infra), money.capability);

  const app = createApp(infra, capabilities);
  const workers: Worker[] = [];
  infra.metrics.observeWorkers(() => workers);
  return ok({
    app,
    infrastructure: infra,
    capabilities,
    money,
    start(only) {
      if (!config.gatewayEnabled) return;
      for (const each of capabilities) {
        if (!only || only.includes(each.name)) workers.push(...each.workers());
      }
    },
    endStreams() {
      for (const each of capabilities) each.endStreams();
    },
    async stop() {
      for (const each of capabilities) await each.stop();
      await Promise.all(workers.map((worker) => worker.stop()));
    },
  });
}

/**
 * What a policy change needs: the enclave to seal it, the origin's admin capability (its tier
 * tightens; a loosening carries an operator's signature), and the node's one x402 payee, what an
 * agent without a payee list may pay. None without an enclave or an admin key: PATCH is then off.
 */
function policyChangeDeps(infra: Infrastructure, checked: CheckedMoney): PolicyChangeDeps | undefined {
  const { config, signer } = infra;
  if (!config.signer.endpoint || !config.signer.adminAuthorityKeyFile) return undefined;
  const sealed = checked?.sealed.policy;
  return {
    db: infra.database.db,
    signer,
    authorize: createCapabilityMinter({
      authority: { keyPath: config.signer.adminAuthorityKeyFile },
      envId: config.envId,
      client: signer,
    }),
    nodePayee:
      sealed?.x402AmountUnits != null && sealed.x402PayTo
        ? { payTo: sealed.x402PayTo, amountUnits: sealed.x402AmountUnits }
        : null,
  };
}

/**
 * Signed transactions that may wait for the chain before signing waits too: two full batches
 * (actions/execute.ts MAX_BATCH), so the chain always has the next block's worth queued while one
 * is on its way, and an agent's answer never runs more than that far ahead of the chain.
 */
const MAX_WAITING_BROADCASTS = 128;

/** Every domain's part of the outbox: the rows that follow its transactions, sweeps, keys, fillers. */
export const OUTBOX_DOMAINS: OutboxDomains = {
  followers: [
    actionsFollower,
    settlementsFollower,
    settlementRevertsFollower,
    reservationMinedFollower,
    reservationEndedFollower,
    settledResourcesFollower,
  ],
  sweeps: [abandonRequestedSweep, expireHoldsSweep],
  senderKeys: [agentWalletKeys],
  fillerRows: [agentFillerRows],
};

/**
 * The node's one outbox, and the money and x402 runtimes over it, from the sealed policy the
 * start-up check matched; undefined with no money switch on.
 */
function buildMoney(
  infra: Infrastructure,
  checked: CheckedMoney,
  { tracker, x402HoldBeyondReceiptMs }: Pick<ComposeOptions, "tracker" | "x402HoldBeyondReceiptMs">,
): { money: MoneyRuntime; x402: X402Runtime | undefined } | undefined {
  if (!checked) return undefined;
  const { sealed, rpc } = checked;
  const { config, logger } = infra;
  const db = infra.database.db;
  const policy = sealed.policy!;
  const fees = createFeeOracle({ rpc, feeCeilingWei: policy.feeCeilingWei });
  const { treasury, settler } = sealed;
  // The service's own senders, whose stuck transactions the tracker replaces; agent wallets are looked up.
  const serviceKeys = new Map<string, string>();
  if (treasury) serviceKeys.set(treasury.faucetAddress.toLowerCase(), treasury.faucetKeyRef);
  if (settler) serviceKeys.set(settler.settlerAddress.toLowerCase(), settler.settlerKeyRef);
  const outbox = createOutbox(
    {
      db,
      rpc,
      logger,
      signer: infra.signer,
      fees,
      serviceKeys,
      chainTimeoutMs: config.chain.timeoutMs,
      maxWaiting: MAX_WAITING_BROADCASTS,
      tracker,
      observer: infra.metrics.outboxBatches,
    },
    OUTBOX_DOMAINS,
  );
  const money: MoneyRuntime = {
    fees,
    operatorPool: policy.operatorPool.toLowerCase(),
    treasury: treasury
      ? { address: treasury.faucetAddress.toLowerCase(), keyRef: treasury.faucetKeyRef }
      : undefined,
    outbox,
  };
  const x402 = buildX402Runtime({
    config,
    sealed,
    money,
    db,
    rpc,
    holdBeyondReceiptMs: x402HoldBeyondReceiptMs,
  });
  return { money, x402 };
}
