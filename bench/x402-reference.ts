/**
 * The reference x402 stack for bench:x402: a Hono server paid through `@x402/hono`'s
 * payment middleware, its facilitator the official `@x402/core` x402Facilitator with `@x402/evm`'s
 * exact scheme in process, settling on the same devnet from one settler account. Nothing of ours
 * is in the payment path; the quote is the one our demo gives.
 *
 * It runs in a process of its own (bench/x402-reference-process.ts), as a deployment would run it
 * and as our origin runs: apart from the payers that load it, so that it never shares a thread with
 * their client, and the CPU the bench reads for it is its own.
 */
import { fork } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "@hono/node-server";
import { x402Facilitator } from "@x402/core/facilitator";
import type { FacilitatorClient } from "@x402/core/server";
import { ExactEvmScheme as ExactEvmFacilitator } from "@x402/evm/exact/facilitator";
import { ExactEvmScheme as ExactEvmServer } from "@x402/evm/exact/server";
import { paymentMiddleware, x402ResourceServer } from "@x402/hono";
import { Hono } from "hono";
import { type Address, createWalletClient, type Hex, http, publicActions } from "viem";
import { privateKeyToAccount, nonceManager as viemNonceManager } from "viem/accounts";
import { devnetChain } from "../devnet/testing.ts";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { officialFacilitatorSigner } from "../testing/x402-official-client.ts";
import { DEMO_EXTRA } from "../testing/x402-quote.ts";

export type ReferenceServerParams = {
  devnetUrl: string;
  port: number;
  /** The settler account's key (funded for gas by the caller). */
  settlerKey: Hex;
  payTo: Address;
  /** viem's nonceManager on the settler account: without it, concurrent settles reuse a nonce. */
  nonceManager: boolean;
  /** How often viem polls for a receipt; the bench gives the reference a short one, as ours. */
  pollingIntervalMs: number;
};

export type ReferenceServer = { url: string; close(): Promise<void> };

/** The reference server's process: its URL, its pid (for its CPU) and how to stop it. */
export type ReferenceProcess = ReferenceServer & { pid: number };

/** What the reference's process tells the bench over the fork's IPC channel. */
export type ReferenceReply = { type: "ready"; url: string } | { type: "failed"; message: string };

/** Starts the reference server in a process of its own and resolves once it listens. */
export async function startReferenceProcess(params: ReferenceServerParams): Promise<ReferenceProcess> {
  const entry = path.join(path.dirname(fileURLToPath(import.meta.url)), "x402-reference-process.ts");
  const child = fork(entry, [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    child.once("message", (reply: ReferenceReply) =>
      reply.type === "ready"
        ? resolve(reply.url)
        : reject(new Error(`the reference failed: ${reply.message}`)),
    );
    child.once("exit", (code) => reject(new Error(`the reference's process exited with ${code}`)));
    child.once("error", reject);
    child.send(params);
  }).catch(async (error: unknown) => {
    child.kill();
    await exited;
    throw error;
  });
  return {
    url,
    pid: child.pid!,
    close: async () => {
      child.kill();
      await exited;
    },
  };
}

/** The demo quote's requirement: 10000 units, 60 s, every `extra` field. */
export const DEMO_PRICE = {
  amount: "10000",
  asset: NATIVE_TRANSFER_AUTH_ADDRESS,
  extra: { ...DEMO_EXTRA },
};

/** The reference server in this process (the reference's own process calls it). */
export async function serveReference(params: ReferenceServerParams): Promise<ReferenceServer> {
  const account = privateKeyToAccount(
    params.settlerKey,
    params.nonceManager ? { nonceManager: viemNonceManager } : undefined,
  );
  const wallet = createWalletClient({
    account,
    chain: devnetChain(params.devnetUrl),
    transport: http(params.devnetUrl, { retryCount: 0 }),
    pollingInterval: params.pollingIntervalMs,
  }).extend(publicActions);
  const signer = officialFacilitatorSigner(wallet);
  const facilitator = new x402Facilitator().register(CAIP2_NETWORK, new ExactEvmFacilitator(signer));
  const resourceServer = new x402ResourceServer(facilitator as unknown as FacilitatorClient).register(
    CAIP2_NETWORK,
    new ExactEvmServer(),
  );

  const app = new Hono();
  app.use(
    paymentMiddleware(
      {
        "GET /x402/demo": {
          accepts: {
            scheme: "exact",
            network: CAIP2_NETWORK,
            payTo: params.payTo,
            price: DEMO_PRICE,
            maxTimeoutSeconds: 60,
          },
          description: "x402 demo resource",
          mimeType: "application/json",
        },
      },
      resourceServer,
    ),
  );
  app.get("/x402/demo", (c) => c.json({ paid: true }));

  const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: params.port });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  return {
    url: `http://127.0.0.1:${params.port}/x402/demo`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
