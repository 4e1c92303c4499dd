/**
 * The official x402 client as a payer on chain 77 uses it (docs/x402.md): `@x402/core`'s
 * x402Client with `@x402/evm`'s exact scheme. It pays only its default assets unless told, so the
 * native USDC precompile is allowed explicitly, capped at `maxAmountPerPayment` units.
 */
import { x402Client } from "@x402/core/client";
import type { ClientEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";

export function chain77X402Client(signer: ClientEvmSigner, maxAmountPerPayment = "10000"): x402Client {
  return x402Client.fromConfig({
    schemes: [{ network: CAIP2_NETWORK, client: new ExactEvmScheme(signer) }],
    spendControls: {
      allowedAssets: [{ network: CAIP2_NETWORK, asset: NATIVE_TRANSFER_AUTH_ADDRESS, maxAmountPerPayment }],
    },
  });
}
