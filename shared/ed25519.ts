/**
 * Ed25519 for capabilities (capability.ts): through Node's crypto (OpenSSL) where it is there, else
 * @noble/curves, with the same bytes and the same strict verification either way. Every privileged
 * enclave request carries a capability the origin signs and the enclave verifies, and noble takes
 * about 1 ms to verify and 0.4 ms to sign on this machine where OpenSSL takes about 0.05 and 0.03:
 * more than the secp256k1 signature the request is for. No static `node:` import, so the module
 * stays runtime-neutral; Node's crypto is reached through process.getBuiltinModule.
 */
import { ed25519 } from "@noble/curves/ed25519";
import { toHex } from "./hex.ts";

type KeyObject = object;
type NodeCrypto = {
  createPrivateKey(key: { key: Uint8Array; format: "der"; type: "pkcs8" }): KeyObject;
  createPublicKey(key: KeyObject | { key: Uint8Array; format: "der"; type: "spki" }): KeyObject & {
    export(options: { format: "der"; type: "spki" }): Uint8Array;
  };
  sign(algorithm: null, data: Uint8Array, key: KeyObject): Uint8Array;
  verify(algorithm: null, data: Uint8Array, key: KeyObject, signature: Uint8Array): boolean;
};
type NodeProcess = { getBuiltinModule?: (id: string) => unknown };

const nodeCrypto = (globalThis as { process?: NodeProcess }).process?.getBuiltinModule?.("node:crypto") as
  | NodeCrypto
  | undefined;

// The fixed DER prefixes of an Ed25519 PKCS#8 private key and SPKI public key (RFC 8410), before
// their 32 raw bytes.
const PKCS8_PREFIX = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
]);
const SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

const concat = (prefix: Uint8Array, raw: Uint8Array): Uint8Array => {
  const der = new Uint8Array(prefix.length + raw.length);
  der.set(prefix, 0);
  der.set(raw, prefix.length);
  return der;
};

/**
 * Key objects, kept so each signature does not parse its key again: a signer's by the secret's own
 * array (no copy of a secret is made to find it), a verifier's by its bytes, a few at most, since a
 * verifier's key comes from a request.
 */
type SecretKey = { private: KeyObject; raw: Uint8Array };
const secretKeys = new WeakMap<Uint8Array, SecretKey>();
const MAX_PUBLIC_KEYS = 16;
const publicKeys = new Map<string, KeyObject>();

function secretKey(crypto: NodeCrypto, secret: Uint8Array): SecretKey {
  let key = secretKeys.get(secret);
  if (!key) {
    const privateKey = crypto.createPrivateKey({
      key: concat(PKCS8_PREFIX, secret),
      format: "der",
      type: "pkcs8",
    });
    const spki = crypto.createPublicKey(privateKey).export({ format: "der", type: "spki" });
    key = { private: privateKey, raw: new Uint8Array(spki.slice(SPKI_PREFIX.length)) };
    secretKeys.set(secret, key);
  }
  return key;
}

function publicKeyObject(crypto: NodeCrypto, publicKey: Uint8Array): KeyObject {
  const id = toHex(publicKey);
  let key = publicKeys.get(id);
  if (!key) {
    key = crypto.createPublicKey({ key: concat(SPKI_PREFIX, publicKey), format: "der", type: "spki" });
    if (publicKeys.size >= MAX_PUBLIC_KEYS) publicKeys.delete(publicKeys.keys().next().value!);
    publicKeys.set(id, key);
  }
  return key;
}

/** The 32-byte public key of a 32-byte secret. */
export function ed25519PublicKey(secret: Uint8Array): Uint8Array {
  if (!nodeCrypto || secret.length !== 32) return ed25519.getPublicKey(secret);
  return secretKey(nodeCrypto, secret).raw;
}

/** The 64-byte signature of `message` (deterministic, RFC 8032: the same bytes either way). */
export function ed25519Sign(message: Uint8Array, secret: Uint8Array): Uint8Array {
  if (!nodeCrypto || secret.length !== 32) return ed25519.sign(message, secret);
  return new Uint8Array(nodeCrypto.sign(null, message, secretKey(nodeCrypto, secret).private));
}

/**
 * Strict RFC 8032 verification, as noble's with `zip215: false`: OpenSSL refuses an S not below the
 * order and a key whose encoding is not canonical, and compares R by its canonical encoding
 * (ed25519.test.ts holds both to the same refusals).
 */
export function ed25519Verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (!nodeCrypto) return ed25519.verify(signature, message, publicKey, { zip215: false });
  if (signature.length !== 64 || publicKey.length !== 32) return false;
  try {
    return nodeCrypto.verify(null, message, publicKeyObject(nodeCrypto, publicKey), signature);
  } catch {
    // A public key that is not a point.
    return false;
  }
}
