/**
 * Wire-level constants shared by the origin, the enclave, the devnet and the edge.
 * Runtime-neutral: no `node:` imports (the edge bundles this file for workerd).
 */

/** Chain id 77, native token USDC with 6 decimals. */
export const CHAIN_ID = 77;
export const CAIP2_NETWORK = "eip155:77";
export const NATIVE_SYMBOL = "USDC";
export const NATIVE_DECIMALS = 6;
/** On chain the native balance is 18-decimal wei; one 6-decimal unit is 10^12 wei. */
export const WEI_PER_UNIT = 10n ** 12n;

/** The NativeTransferAuth precompile. */
export const NATIVE_TRANSFER_AUTH_ADDRESS = "0x2d00000000000000000000000000000000000006" as const;
export const EIP712_DOMAIN_NAME = "USDC";
export const EIP712_DOMAIN_VERSION = "2";

/** POST /agent/v1/rpc: the closed read allowlist (docs/api.md). */
export const RPC_READ_ALLOWLIST = [
  "eth_chainId",
  "eth_blockNumber",
  "eth_getBalance",
  "eth_getTransactionByHash",
  "eth_getTransactionReceipt",
  "eth_getBlockByNumber",
] as const;
export const RPC_MAX_BATCH = 100;
export const RPC_MAX_BATCH_BYTES = 64 * 1024;
/**
 * Ours: the most one upstream answer to /rpc may weigh; a larger one is dropped while it streams
 * and answered with a JSON-RPC error, never buffered whole. The largest legitimate answer on the
 * devnet is a full batch of 100 of its largest blocks with their transactions (about 2.5 KB each,
 * one transaction per block) or of the receipts of the service's own transactions (at most
 * about 2.2 KB each): about 250 KB. 2 MiB leaves eight times that, and still fits one receipt
 * of some 2,000 logs of 256 bytes.
 */
export const RPC_MAX_RESPONSE_BYTES = 2 * 1024 * 1024;

/**
 * How long a request body may take to arrive once it is read: every body the service takes is a
 * few KiB (64 KiB at most), which any client sends in well under a second; one that trickles in
 * slower is a slow-body attack. The origin's routes (origin/http/read-body.ts) and the edge, where
 * it reads a body before forwarding it (edge-worker/facilitator.ts), both answer it 408 past this.
 */
export const BODY_DEADLINE_MS = 5_000;
export const API_VERSION = "v1";
export const DEFAULT_BASE_PATH = "/77";

/** The closed set of token capabilities. */
export const CAPABILITIES = ["read", "faucet", "transfer"] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** Header names of the edge's forwarding (docs/security.md) and of the operator routes. */
export const HEADER_REGISTRATION = "x-svc-registration";
export const HEADER_REGISTRATION_IP = "x-svc-registration-ip";
/** A registration's proof of work, `<challenge>.<solution>` (shared/registration-proof.ts). */
export const HEADER_REGISTRATION_PROOF = "x-svc-registration-proof";
export const HEADER_EDGE_SECRET = "x-svc-edge-secret";
/** The client address the edge saw, set by the edge on every forwarded request. */
export const HEADER_CLIENT_IP = "x-svc-client-ip";
/**
 * The URL the client requested at the edge, set by the edge on every request it forwards under
 * {base}/x402/ (and stripped from the client's on every route): the origin names x402 resources
 * by it (its own URL is private), with the edge secret only.
 */
export const HEADER_REQUEST_URL = "x-svc-request-url";
/**
 * The edge's pre-auth lockouts (edge-worker/lockouts.ts), with the edge secret only. On a request:
 * the lane of the lockout allowance the edge let this token id through (`first_sight`, `come_back`)
 * from an address it holds locked out. On the origin's answers: the token of such a request
 * authenticated; a pre-auth 429's address stays past its failure limit for this many seconds, and
 * these token ids (space-separated) authenticated from it lately. The edge strips all three.
 */
export const HEADER_LOCKOUT_LANE = "x-svc-lockout-lane";
export const HEADER_AUTHENTICATED = "x-svc-authenticated";
export const HEADER_ADDRESS_LOCKED = "x-svc-address-locked";
export const HEADER_ADDRESS_TOKENS = "x-svc-address-tokens";
/**
 * On the origin's answer to an unpaid GET under {base}/x402/, with the edge secret only: the
 * seconds the same answer holds for every unpaid GET of the same URL (edge-worker/quotes.ts). The
 * edge strips it.
 */
export const HEADER_QUOTE_REUSE = "x-svc-quote-reuse";
export const HEADER_ADMIN_API_TOKEN = "x-admin-api-token";
export const HEADER_REGISTRATION_ADMIN_TOKEN = "x-registration-admin-token";
/** A console session's token, from signing in with a passkey (docs/operations.md#signing-in-with-a-passkey). */
export const HEADER_CONSOLE_SESSION = "x-console-session";

/**
 * Labels of the enclave protocol: the hello's protocol and profile (the enclave refuses others), and
 * the domains of capabilities and identity proofs.
 */
export const ENCLAVE_PROTOCOL = "svc-hsm/agent/v1";
export const ENCLAVE_PROFILE = "agent_gateway";
export const CAPABILITY_DOMAIN = "svc-hsm/agent-cap/v1";
export const IDENTITY_PROOF_LABEL = "svc-hsm/agent-identity-proof/v1";
