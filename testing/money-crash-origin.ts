/**
 * Fault-injection child for the money crash tests: the origin as main.ts composes it
 * (configuration from the environment, the check against the sealed policy, the gateway), with one
 * addition: it SIGKILLs itself at MONEY_CRASH_AT during its first money operation — instants that
 * cannot be hit from outside: `after_signed` (its transactions stored and committed `signed`, the
 * broadcast not yet sent) or `after_broadcast` of an agent action, or `settle_after_broadcast` of
 * an x402 settlement (after the chain accepted it, before its receipt), or `after_enclave_signed`
 * of a faucet payout (the enclave's signature back, nothing of it stored). The fault is an
 * infrastructure override: the chain upstream is wrapped, so the kill comes around the first
 * eth_sendRawTransaction call, whichever capability makes it; or the signer client is, so it comes
 * as the first sign_faucet answer arrives. Its workers (the transaction
 * tracker) never run, so whatever it leaves in flight is for the next origin to finish. Prints its
 * base URL.
 */

import type { JsonRpcUpstream } from "../origin/chain/json-rpc-upstream.ts";
import { composeOrigin } from "../origin/compose.ts";
import { loadConfig } from "../origin/config.ts";
import { createLogger } from "../origin/logger.ts";
import { openInfrastructure } from "../origin/open-infrastructure.ts";
import { startHttpServer } from "../origin/server.ts";
import type { SignerClient } from "../origin/signer/types.ts";

const config = loadConfig(process.env);
const crashAt = process.env.MONEY_CRASH_AT;
const CRASH_POINTS = ["after_signed", "after_broadcast", "settle_after_broadcast", "after_enclave_signed"];
if (!crashAt || !CRASH_POINTS.includes(crashAt)) throw new Error("MONEY_CRASH_AT is required");
const die = (): void => void process.kill(process.pid, "SIGKILL");

/** True for a JSON-RPC batch of raw transactions: what the money lane and the settler broadcast. */
const isBroadcast = (payload: unknown): boolean =>
  Array.isArray(payload) &&
  payload.some((call) => (call as { method?: unknown }).method === "eth_sendRawTransaction");

/** True when the chain took at least one of them (an answer with a result, not an error). */
const accepted = (body: unknown): boolean =>
  Array.isArray(body) && body.some((answer) => (answer as { result?: unknown }).result !== undefined);

/** The upstream, with the kill around its broadcasts. */
function dyingAround(upstream: JsonRpcUpstream): JsonRpcUpstream {
  return {
    async send(payload) {
      if (!isBroadcast(payload) || crashAt === "after_enclave_signed") return upstream.send(payload);
      if (crashAt === "after_signed") die();
      const result = await upstream.send(payload);
      // after_broadcast (the money lane's) and settle_after_broadcast (the settler's) are one
      // instant here: nothing else in this child broadcasts.
      if (result.ok && accepted(result.value)) die();
      return result;
    },
    close: () => upstream.close(),
  };
}

/** The signer client, dying as the enclave's first payout signature comes back. */
function dyingOnPayout(signer: SignerClient): SignerClient {
  if (crashAt !== "after_enclave_signed") return signer;
  return new Proxy(signer, {
    get(target, name, receiver) {
      if (name !== "signFaucet") return Reflect.get(target, name, receiver);
      return async (params: Parameters<SignerClient["signFaucet"]>[0]) => {
        const result = await target.signFaucet(params);
        if (result.ok) die();
        return result;
      };
    },
  });
}

// Built as main.ts builds it; the one override is the fault.
const opened = await openInfrastructure(config, createLogger("silent"), {
  rpc: dyingAround,
  signer: dyingOnPayout,
});
const composed = await composeOrigin(opened.infrastructure, { sealed: opened.sealed });
if (!composed.ok) throw new Error(`money refused: ${composed.error.errors.join("; ")}`);
if (!composed.value.money.runtime) throw new Error("money refused: off");
const server = await startHttpServer(composed.value.app, "127.0.0.1", 0);
process.stdout.write(`${server.url}${config.http.basePath}\n`);
