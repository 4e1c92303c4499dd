/**
 * Capability objects (docs/enclave.md): an Ed25519-signed CBOR map
 * `{ver, authority, op, request_id, chain_id, env_id, instance_id, scope, counter, payload_binding}`
 * plus `sig`. sig = Ed25519("svc-hsm/agent-cap/v1\0" ‖ canonical CBOR of the map without sig).
 * payload_binding = keccak256(canonical CBOR of [op, params]).
 * instance_id names the one enclave instance the capability is for (sealed at its `init`, answered
 * by get_sealed_identity): a replacement initialised with the same env id and authority keys has
 * another one, so a capability relayed to the lost enclave is worthless in its replacement, even
 * though the replacement's counters start again at 1. Version 1 had no instance_id and is refused.
 * Used by the enclave to verify, and by the origin and the operator scripts to mint.
 * Runtime-neutral: no `node:` imports (ed25519.ts reaches Node's crypto where it is there).
 */
import { ed25519 } from "@noble/curves/ed25519";
import * as z from "zod";
import { encodeCanonicalCbor } from "./canonical-cbor.ts";
import { CAPABILITY_DOMAIN } from "./constants.ts";
import { ed25519PublicKey, ed25519Sign, ed25519Verify } from "./ed25519.ts";
import {
  CAPABILITY_SCOPES,
  type CapabilityScope,
  PRIVILEGED_OP_SCOPE,
  type PrivilegedOp,
} from "./enclave-protocol.ts";
import { fromHex, type Hex, toHex } from "./hex.ts";
import { keccak256 } from "./keccak.ts";

export const CAPABILITY_VERSION = 2;

const hex32 = z.string().regex(/^0x[0-9a-f]{64}$/);
/** An enclave instance id: 16 random bytes, lowercase 0x-hex. */
export const instanceIdSchema = z.string().regex(/^0x[0-9a-f]{32}$/);

export const capabilityBodySchema = z.strictObject({
  ver: z.literal(CAPABILITY_VERSION),
  authority: hex32,
  op: z.string().min(1).max(64),
  request_id: z.string().min(1).max(128),
  chain_id: z.number().int().nonnegative(),
  env_id: z.string().min(1).max(64),
  instance_id: instanceIdSchema,
  scope: z.enum(CAPABILITY_SCOPES),
  counter: z.number().int().positive(),
  payload_binding: hex32,
});
export type CapabilityBody = z.infer<typeof capabilityBodySchema>;

export const capabilitySchema = capabilityBodySchema.extend({
  sig: z.string().regex(/^0x[0-9a-f]{128}$/),
});
export type Capability = z.infer<typeof capabilitySchema>;

const textEncoder = new TextEncoder();
const DOMAIN_PREFIX = textEncoder.encode(`${CAPABILITY_DOMAIN}\0`);

/** The bytes Ed25519 signs: domain label, NUL, canonical CBOR of the body. */
export function capabilitySigningPreimage(body: CapabilityBody): Uint8Array {
  const encoded = encodeCanonicalCbor(body);
  const preimage = new Uint8Array(DOMAIN_PREFIX.length + encoded.length);
  preimage.set(DOMAIN_PREFIX, 0);
  preimage.set(encoded, DOMAIN_PREFIX.length);
  return preimage;
}

/**
 * The payload binding: keccak256 of the op and its canonical params. `params` must be the exact wire params
 * (snake_case, bigints as decimal strings, bytes as Uint8Array); throws CanonicalCborError otherwise.
 */
export function payloadBinding(op: string, params: unknown): Hex {
  return toHex(keccak256(encodeCanonicalCbor([op, params])));
}

/** Ed25519 public key (0x-hex) of a 32-byte authority secret. */
export function authorityPublicKey(secret: Uint8Array): Hex {
  return toHex(ed25519PublicKey(secret));
}

/** A fresh Ed25519 authority secret (32 bytes) from the platform CSPRNG. */
export function randomAuthoritySecret(): Uint8Array {
  return ed25519.utils.randomPrivateKey();
}

export type MintCapabilityParams = {
  authoritySecret: Uint8Array;
  op: PrivilegedOp;
  /** Exactly the wire params that will be sent with the request. */
  params: unknown;
  requestId: string;
  chainId: number;
  envId: string;
  /** The instance id of the enclave that will receive it (its get_sealed_identity). */
  instanceId: string;
  counter: number;
};

/** Mints a capability for `op` over `params`; the scope is the op's tier. */
export function mintCapability(input: MintCapabilityParams): Capability {
  const body: CapabilityBody = {
    ver: CAPABILITY_VERSION,
    authority: authorityPublicKey(input.authoritySecret),
    op: input.op,
    request_id: input.requestId,
    chain_id: input.chainId,
    env_id: input.envId,
    instance_id: input.instanceId,
    scope: PRIVILEGED_OP_SCOPE[input.op],
    counter: input.counter,
    payload_binding: payloadBinding(input.op, input.params),
  };
  const sig = toHex(ed25519Sign(capabilitySigningPreimage(body), input.authoritySecret));
  return { ...body, sig };
}

/** Checks the Ed25519 signature only (strict RFC 8032 verification, no ZIP-215 leniency). */
export function verifyCapabilitySignature(cap: Capability): boolean {
  const { sig, ...body } = cap;
  try {
    return ed25519Verify(fromHex(sig), capabilitySigningPreimage(body), fromHex(body.authority));
  } catch {
    return false;
  }
}

/** Counter key: counters are contiguous per (authority, env, scope, op). */
export function capabilityCounterKey(
  authority: string,
  envId: string,
  scope: CapabilityScope,
  op: string,
): string {
  return `${authority}|${envId}|${scope}|${op}`;
}
