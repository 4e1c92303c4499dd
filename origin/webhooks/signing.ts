/**
 * The two signatures of a delivery (docs/api.md#webhooks): `v1`, HMAC-SHA256 with the endpoint's
 * `whsec_` secret, and `v1a`, Ed25519 with the origin's webhook key, whose public half the keys
 * route publishes. Both sign `{webhook-id}.{webhook-timestamp}.{body}`.
 */
import {
  createHash,
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import path from "node:path";

const SECRET_PREFIX = "whsec_";
/** Standard Webhooks asks for 24 to 64 bytes; 32 is HMAC-SHA256's block-sized sweet spot. */
const SECRET_BYTES = 32;

/** A new endpoint secret: `whsec_` and the base64 of 32 random bytes. */
export function newEndpointSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString("base64")}`;
}

/** What both signatures cover. */
export function signedContent(webhookId: string, timestamp: number, body: string): string {
  return `${webhookId}.${timestamp}.${body}`;
}

/** `v1,<base64 HMAC-SHA256>` with the secret's bytes (the base64 after `whsec_`) as the key. */
export function hmacSignature(secret: string, content: string): string {
  const key = Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    "base64",
  );
  return `v1,${createHmac("sha256", key).update(content).digest("base64")}`;
}

/** The origin's webhook key and its public form as the keys route serves it. */
export type WebhookSigningKey = {
  privateKey: KeyObject;
  /** The JWK of the public key: `{kty: "OKP", crv: "Ed25519", x, kid}`. */
  jwk: { kty: "OKP"; crv: "Ed25519"; x: string; kid: string };
};

/** `v1a,<base64 Ed25519 signature>`. */
export function ed25519Signature(key: WebhookSigningKey, content: string): string {
  return `v1a,${sign(null, Buffer.from(content), key.privateKey).toString("base64")}`;
}

/**
 * The `webhook-signature` header, space-separated as the convention lists signatures: `v1`, then
 * one `v1a` per key of the file, the newest first. While a rotation is under way (two keys in the
 * file) a receiver that still holds only the old key set verifies, and one that fetched the new
 * set verifies with the newest (docs/api.md#webhooks).
 */
export function signatureHeader(params: {
  secret: string;
  keys: readonly WebhookSigningKey[];
  webhookId: string;
  timestamp: number;
  body: string;
}): string {
  const content = signedContent(params.webhookId, params.timestamp, params.body);
  return [
    hmacSignature(params.secret, content),
    ...params.keys.map((key) => ed25519Signature(key, content)),
  ].join(" ");
}

function keyOf(privateKey: KeyObject): WebhookSigningKey {
  if (privateKey.asymmetricKeyType !== "ed25519") throw new Error("the webhook signing key is not Ed25519");
  const exported = createPublicKey(privateKey).export({ format: "jwk" });
  const x = exported.x!;
  // The kid names the key by its own bytes, so a rotated key gets a new kid without a counter.
  const kid = createHash("sha256").update(Buffer.from(x, "base64url")).digest("base64url").slice(0, 22);
  return { privateKey, jwk: { kty: "OKP", crv: "Ed25519", x, kid } };
}

const PEM_BLOCK = /-----BEGIN PRIVATE KEY-----[\s\S]*?-----END PRIVATE KEY-----\n?/g;

async function readKeyFile(file: string): Promise<string[]> {
  const info = await stat(file);
  if ((info.mode & 0o077) !== 0) {
    throw new Error(`AGENT_WEBHOOKS_SIGNING_KEY_FILE ${file}: group or others may read it (chmod 600)`);
  }
  const blocks = (await readFile(file, "utf8")).match(PEM_BLOCK) ?? [];
  if (blocks.length === 0) {
    throw new Error(`AGENT_WEBHOOKS_SIGNING_KEY_FILE ${file}: not a PKCS#8 PEM private key`);
  }
  return blocks;
}

function keyOfBlock(file: string, block: string, index: number): WebhookSigningKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: block, format: "pem" });
  } catch {
    throw new Error(
      `AGENT_WEBHOOKS_SIGNING_KEY_FILE ${file}: key ${index + 1} is not a PKCS#8 PEM private key`,
    );
  }
  return keyOf(privateKey);
}

/**
 * Reads the key file: one or more PKCS#8 PEM Ed25519 keys, the newest last (add-key appends).
 * Returns them newest first. Refuses a file others may read (mode 0600, as the operator key); an
 * error never carries the file's content.
 */
export async function loadWebhookSigningKeys(file: string): Promise<WebhookSigningKey[]> {
  const blocks = await readKeyFile(file);
  return blocks.map((block, index) => keyOfBlock(file, block, index)).reverse();
}

/**
 * Appends a new key to the file (a rotation's first step, docs/operations.md#webhooks): origins
 * started after it serve both public keys and sign with both. Returns the new key.
 */
export async function addWebhookSigningKey(file: string): Promise<WebhookSigningKey> {
  const blocks = await readKeyFile(file);
  const { privateKey } = generateKeyPairSync("ed25519");
  const pem = privateKey.export({ format: "pem", type: "pkcs8" }) as string;
  await rewriteKeyFile(file, [...blocks, pem]);
  return keyOf(privateKey);
}

export type RetireKeyResult = { ok: true } | { ok: false; error: "no_such_kid" | "last_key" };

/** Removes the key `kid` from the file (a rotation's last step); never the only one. */
export async function retireWebhookSigningKey(file: string, kid: string): Promise<RetireKeyResult> {
  const blocks = await readKeyFile(file);
  const kept = blocks.filter((block, index) => keyOfBlock(file, block, index).jwk.kid !== kid);
  if (kept.length === blocks.length) return { ok: false, error: "no_such_kid" };
  if (kept.length === 0) return { ok: false, error: "last_key" };
  await rewriteKeyFile(file, kept);
  return { ok: true };
}

/** Writes a new file beside the old one, 0600 from its creation, and renames it over the old. */
async function rewriteKeyFile(file: string, blocks: readonly string[]): Promise<void> {
  const next = `${file}.${process.pid}.next`;
  await writeFile(next, blocks.map((block) => (block.endsWith("\n") ? block : `${block}\n`)).join(""), {
    mode: 0o600,
    flag: "wx",
  });
  await rename(next, file);
}

/** Makes a new Ed25519 key file (0600) unless one is there; the local stack and tests use it. */
export async function ensureWebhookSigningKeyFile(file: string): Promise<void> {
  if (existsSync(file)) return;
  const { privateKey } = generateKeyPairSync("ed25519");
  await mkdir(path.dirname(file), { recursive: true });
  const pem = privateKey.export({ format: "pem", type: "pkcs8" }) as string;
  await writeFile(file, pem, { mode: 0o600, flag: "wx" });
}
