import { Hono } from "hono";
import { withinMs } from "../shared/within-ms.ts";
import { type Capability, capability } from "./capability.ts";
import type { AppEnv } from "./http/env.ts";
import type { Infrastructure } from "./infrastructure.ts";
import { route } from "./openapi/route.ts";
import type { KeyHoldingReport } from "./signer/key-holding.ts";
import type { PolicyHoldingReport } from "./signer/policy-holding.ts";
import { readEnclavePolicy } from "./signer/sealed-policy.ts";

/** /healthz must answer promptly even when the enclave hangs. */
export const HEALTH_ENCLAVE_TIMEOUT_MS = 2_000;
/** Nor when Postgres stops answering (a partition, a frozen server): then it is `down`. */
export const HEALTH_DATABASE_TIMEOUT_MS = 2_000;

type Probe = { ok: boolean; ms: number; error?: string };

/** GET {base}/healthz, whatever the gateway switch. */
export function createHealthModule(infra: Infrastructure): Capability {
  return capability("health", { routes: [{ path: "/", router: createHealthRouter(infra) }] });
}

/**
 * GET {base}/healthz: private (the edge never routes it). 200 while the database answers,
 * 503 `down` when it fails or does not answer within HEALTH_DATABASE_TIMEOUT_MS; the chain and the
 * enclave are reported but do not fail the check, since the origin can run without them. The enclave section is the sealed policy, read live (docs/enclave.md): limits
 * and addresses, no key material. `enclave.keys` says whether the enclave holds the keys the
 * database assigns: an enclave initialised afresh beside this database makes the status
 * `degraded`, with the instruction to restore the keys, since every signing request would fail.
 * `enclave.policies` says whether it holds the spending policies and the freeze the database
 * stores: a recovered enclave before `npm run policy -- reseal` makes the status `degraded`, with
 * that instruction.
 */
export function createHealthRouter(deps: Infrastructure): Hono<AppEnv> {
  const router = new Hono<AppEnv>();
  route(router, "/", "health", async (c) => {
    const enclavePolicy = readEnclavePolicy(deps.signer, {
      configured: deps.config.signer.endpoint !== undefined,
      timeoutMs: HEALTH_ENCLAVE_TIMEOUT_MS,
    });
    const keysReport = deps.keysHeld
      ? withTimeout(deps.keysHeld(), { checked: 0, missing: 0 }, HEALTH_ENCLAVE_TIMEOUT_MS)
      : undefined;
    const policiesReport = deps.policiesHeld
      ? withTimeout(
          deps.policiesHeld(),
          { checked: 0, behind: 0, freeze_missing: false },
          HEALTH_ENCLAVE_TIMEOUT_MS,
        )
      : undefined;
    // The database and the chain are asked at once; each within its own bound (the chain's is
    // CHAIN_RPC_TIMEOUT_MS, its client's).
    const dbReport = probe(() => deps.database.ping(), HEALTH_DATABASE_TIMEOUT_MS);
    const chainReport = probeChain(deps.chain);
    const db = await dbReport;
    const chain = await chainReport;
    const policy = await enclavePolicy;
    const keys = await keysReport;
    const policies = await policiesReport;
    const enclave = { ...policy, ...(keys ? { keys } : {}), ...(policies ? { policies } : {}) };
    // A check that could not ask is reported, not held against the status (as the policy read's).
    const enclaveOk =
      !policy.configured ||
      (policy.ok &&
        (keys === undefined || keys.missing === 0) &&
        (policies === undefined || (policies.behind === 0 && !policies.freeze_missing)));
    const status = db.ok ? (chain.ok && enclaveOk ? "ok" : "degraded") : "down";
    return c.json(
      { status, database: { driver: deps.database.driver, ...db }, chain, enclave },
      db.ok ? 200 : 503,
    );
  });
  return router;
}

/**
 * A holding check's answer, or `unknown` marked as not answered: in time (`timeout`) or at all
 * (`error`). The status keeps to the policy read's then.
 */
async function withTimeout<Report extends KeyHoldingReport | PolicyHoldingReport>(
  check: Promise<Report>,
  unknown: Omit<Report, "ok" | "error" | "instruction">,
  ms: number,
): Promise<Report> {
  const answered = await withinMs(
    check.catch(() => ({ ...unknown, ok: false, error: "error" }) as Report),
    ms,
  );
  return answered ?? ({ ...unknown, ok: false, error: "timeout" } as Report);
}

async function probeChain(
  client: Infrastructure["chain"],
): Promise<Probe & { configured: boolean; block_number?: string }> {
  if (!client) return { configured: false, ok: false, ms: 0, error: "CHAIN_RPC_URL is not set" };
  let blockNumber: bigint | undefined;
  const result = await probe(async () => {
    blockNumber = await client.getBlockNumber({ cacheTime: 0 });
  });
  return {
    configured: true,
    ...result,
    ...(blockNumber === undefined ? {} : { block_number: blockNumber.toString() }),
  };
}

/** Runs `check`; a check still running after `timeoutMs` (when given) is reported as `timeout`. */
async function probe(check: () => Promise<void>, timeoutMs?: number): Promise<Probe> {
  const started = performance.now();
  const running = check().then(() => "done" as const);
  // A check given up on may still fail later: nobody is left to hear it.
  running.catch(() => {});
  try {
    const outcome = timeoutMs === undefined ? await running : await withinMs(running, timeoutMs);
    if (outcome === undefined) return { ok: false, ms: elapsed(started), error: "timeout" };
    return { ok: true, ms: elapsed(started) };
  } catch (error) {
    // Only the error class: driver messages can carry connection strings.
    return { ok: false, ms: elapsed(started), error: error instanceof Error ? error.name : "error" };
  }
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}
