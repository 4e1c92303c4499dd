import { Hono } from "hono";
import { type Capability, capability } from "./capability.ts";
import type { AppEnv } from "./http/env.ts";
import type { Infrastructure } from "./infrastructure.ts";
import { route } from "./openapi/route.ts";
import type { KeyHoldingReport } from "./signer/key-holding.ts";
import { readEnclavePolicy } from "./signer/sealed-policy.ts";

/** /healthz must answer promptly even when the enclave hangs. */
export const HEALTH_ENCLAVE_TIMEOUT_MS = 2_000;

type Probe = { ok: boolean; ms: number; error?: string };

/** GET {base}/healthz, whatever the gateway switch. */
export function createHealthModule(infra: Infrastructure): Capability {
  return capability("health", { routes: [{ path: "/", router: createHealthRouter(infra) }] });
}

/**
 * GET {base}/healthz: private (the edge never routes it). 200 while the database answers;
 * the chain and the enclave are reported but do not fail the check, since the origin can run
 * without them. The enclave section is the sealed policy, read live (docs/enclave.md): limits
 * and addresses, no key material. `enclave.keys` says whether the enclave holds the keys the
 * database assigns: an enclave initialised afresh beside this database makes the status
 * `degraded`, with the instruction to restore the keys, since every signing request would fail.
 */
export function createHealthRouter(deps: Infrastructure): Hono<AppEnv> {
  const router = new Hono<AppEnv>();
  route(router, "/", "health", async (c) => {
    const enclavePolicy = readEnclavePolicy(deps.signer, {
      configured: deps.config.signer.endpoint !== undefined,
      timeoutMs: HEALTH_ENCLAVE_TIMEOUT_MS,
    });
    const keysReport = deps.keysHeld ? withTimeout(deps.keysHeld(), HEALTH_ENCLAVE_TIMEOUT_MS) : undefined;
    const db = await probe(() => deps.database.ping());
    let chain: Probe & { configured: boolean; block_number?: string };
    if (deps.chain) {
      const client = deps.chain;
      let blockNumber: bigint | undefined;
      const result = await probe(async () => {
        blockNumber = await client.getBlockNumber({ cacheTime: 0 });
      });
      chain = {
        configured: true,
        ...result,
        ...(blockNumber === undefined ? {} : { block_number: blockNumber.toString() }),
      };
    } else {
      chain = { configured: false, ok: false, ms: 0, error: "CHAIN_RPC_URL is not set" };
    }
    const policy = await enclavePolicy;
    const keys = await keysReport;
    const enclave = keys ? { ...policy, keys } : policy;
    const enclaveOk = !policy.configured || (policy.ok && (keys === undefined || keys.missing === 0));
    const status = db.ok ? (chain.ok && enclaveOk ? "ok" : "degraded") : "down";
    return c.json(
      { status, database: { driver: deps.database.driver, ...db }, chain, enclave },
      db.ok ? 200 : 503,
    );
  });
  return router;
}

/** The key check's answer, or a report saying it did not come in time (the status keeps to the policy's). */
async function withTimeout(check: Promise<KeyHoldingReport>, ms: number): Promise<KeyHoldingReport> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<KeyHoldingReport>((resolve) => {
    timer = setTimeout(() => resolve({ checked: 0, missing: 0, ok: false, error: "timeout" }), ms);
  });
  try {
    return await Promise.race([
      check.catch(() => ({ checked: 0, missing: 0, ok: false, error: "error" })),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function probe(check: () => Promise<void>): Promise<Probe> {
  const started = performance.now();
  try {
    await check();
    return { ok: true, ms: elapsed(started) };
  } catch (error) {
    // Only the error class: driver messages can carry connection strings.
    return { ok: false, ms: elapsed(started), error: error instanceof Error ? error.name : "error" };
  }
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}
