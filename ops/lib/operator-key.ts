/**
 * The operator's P-256 key (docs/enclave.md#agent-policies-operator-keys-and-approvals): made once,
 * kept as a PKCS#8 PEM file only its owner can read (0600), and used to sign approvals of what
 * loosens an agent's policy, unfreezes the node or approves a held action. The private key never
 * leaves this process and is never printed; only its public half is enrolled in the enclave.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { readPrivateKeyFile } from "../../origin/signer/private-key-file.ts";
import { type Hex, toHex } from "../../shared/hex.ts";
import {
  type KeyApproval,
  type OperatorApprovalMessageInput,
  operatorApprovalMessage,
} from "../../shared/operator-approval.ts";
import { type NewFileDisk, writeNewFileDurably } from "./new-file.ts";

/** A loaded operator key: the private half (a KeyObject, never serialised again) and its public point. */
export type OperatorKey = { privateKey: KeyObject; publicKey: Hex };

/**
 * Makes a P-256 key and writes it to `file` (PKCS#8 PEM, mode 0600; an existing file is refused),
 * on disk before its public half is returned to be enrolled (new-file.ts).
 */
export async function generateOperatorKey(file: string, disk?: NewFileDisk): Promise<{ publicKey: Hex }> {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }) as string;
  await writeNewFileDurably(file, new TextEncoder().encode(pem), 0o600, disk);
  return { publicKey: publicPoint(privateKey) };
}

/** Reads an operator key written by generateOperatorKey (or any P-256 PKCS#8 PEM). */
export async function readOperatorKey(file: string): Promise<OperatorKey> {
  const privateKey = createPrivateKey(await readPrivateKeyFile(file));
  if (privateKey.asymmetricKeyType !== "ec" || privateKey.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
    throw new Error(`${file} is not a P-256 private key`);
  }
  return { privateKey, publicKey: publicPoint(privateKey) };
}

/**
 * Signs an approval of `input.op` over `input.subject` (and a policy change's `policyBefore`) for
 * one enclave instance. The counter the caller passes must exceed the last one this key used on
 * that enclave; the current time in milliseconds (operatorCounterNow) grows without a round trip.
 */
export function signOperatorApproval(key: OperatorKey, input: OperatorApprovalMessageInput): KeyApproval {
  const message = operatorApprovalMessage(input);
  const signature = sign("sha256", message, { key: key.privateKey, dsaEncoding: "ieee-p1363" });
  return {
    keyId: input.keyId,
    counter: input.counter,
    expiresAt: input.expiresAt,
    signature: toHex(new Uint8Array(signature)),
    ...(input.policyBefore === undefined ? {} : { policyBefore: input.policyBefore }),
  };
}

/** The default counter of an approval: now in milliseconds (the enclave only needs it to grow). */
export function operatorCounterNow(): number {
  return Date.now();
}

/** 0x04 ‖ X ‖ Y of the key's public half. */
export function publicPoint(privateKey: KeyObject): Hex {
  const jwk = createPublicKey(privateKey).export({ format: "jwk" });
  const x = Buffer.from(jwk.x!, "base64url");
  const y = Buffer.from(jwk.y!, "base64url");
  return toHex(Uint8Array.from([4, ...x, ...y]));
}
