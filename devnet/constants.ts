/**
 * Devnet-only constants. Chain-wide values (chain id, precompile address, EIP-712 domain) live in
 * shared/constants.ts; these describe how this particular node runs.
 */
import { WEI_PER_UNIT } from "../shared/constants.ts";

/** Local ports; the devnet listens on 8545 unless told otherwise. */
export const DEFAULT_DEVNET_PORT = 8545;
/** Loopback only: the devnet has no authentication and a funding method. */
export const DEFAULT_DEVNET_HOST = "127.0.0.1";

export const DEVNET_CLIENT_VERSION = "agent-wallet-devnet/0.1.0/ethereumjs-vm-10";

/** Gas limit of every block; also the cap for eth_call and eth_estimateGas, as geth caps by block. */
export const BLOCK_GAS_LIMIT = 30_000_000n;
/** London's initial base fee; with one small transaction per block it decays towards a few wei. */
export const GENESIS_BASE_FEE_WEI = 1_000_000_000n;
/** Tip suggested by eth_maxPriorityFeePerGas (and added to eth_gasPrice), as Hardhat and Anvil do. */
export const SUGGESTED_PRIORITY_FEE_WEI = 1_000_000_000n;

/**
 * Fees go to the zero address: there is no block producer to pay, and the chain cannot mint, so
 * the tips leave circulation like the burnt base fee does.
 */
export const COINBASE_ADDRESS = "0x0000000000000000000000000000000000000000" as const;

/**
 * Well-known development key of the operator pool (the genesis bridge operator), derived as
 * keccak256("agent-wallet-service/devnet/operator-pool/v1") so anyone can reproduce it.
 * Local stack and tests only: it guards nothing of value.
 */
export const DEV_OPERATOR_POOL_PRIVATE_KEY =
  "0xf1e88dbd5536f2629a2c6d364985b943e16a089420296c5718126639185b1935" as const;
export const DEV_OPERATOR_POOL_ADDRESS = "0x54A305F4ad9E69d59Fd3e76646FFa7b8993fFE7B" as const;

/** Genesis balance of the operator pool: one billion USDC, in wei. */
export const DEFAULT_OPERATOR_POOL_BALANCE_WEI = 1_000_000_000n * 1_000_000n * WEI_PER_UNIT;

/** The one-byte marker code at the precompile address (INVALID, never executed). */
export const PRECOMPILE_MARKER_CODE = Uint8Array.of(0xfe);

/** Largest accepted HTTP body; a batch of 100 raw transactions fits comfortably. */
export const MAX_REQUEST_BYTES = 5 * 1024 * 1024;
/** eth_feeHistory returns at most this many blocks, as geth does. */
export const MAX_FEE_HISTORY_BLOCKS = 1024;
