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
import { chown, link, mkdir, readFile, rename, stat, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { err, ok, type Result } from "../../shared/result.ts";
import { sleep } from "../../shared/sleep.ts";

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
 * The `webhook-signature` header, space-separated as the convention lists signatures: one `v1` per
 * secret of the endpoint (its current one, then the one a rotation replaced while that still signs),
 * then one `v1a` per key of the file, the newest first. While either rotates, a receiver that still
 * holds the old secret or key set verifies, and one that has the new verifies with it
 * (docs/api.md#webhooks).
 */
export function signatureHeader(params: {
  /** The endpoint's secrets, the current first. */
  secrets: readonly string[];
  keys: readonly WebhookSigningKey[];
  webhookId: string;
  timestamp: number;
  body: string;
}): string {
  const content = signedContent(params.webhookId, params.timestamp, params.body);
  return [
    ...params.secrets.map((secret) => hmacSignature(secret, content)),
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

/** The key file as read and checked: its PEM blocks in file order (the newest last) and their keys. */
export type WebhookKeyFile = {
  file: string;
  blocks: readonly string[];
  /** In file order, one per block. */
  keys: readonly WebhookSigningKey[];
};

/** Why a key file was refused; the message names the file, never its content. */
export type WebhookKeyFileError = {
  code: "unreadable" | "open_to_others" | "not_a_key";
  message: string;
};

/**
 * Reads and checks the key file, changing nothing: it must be readable, `0600` (no group or other
 * bit, as the operator key) and hold one or more PKCS#8 PEM Ed25519 keys. A refusal is a value, so
 * the origin's start and the operator tool each say it in their own way.
 */
export async function readWebhookKeyFile(file: string): Promise<Result<WebhookKeyFile, WebhookKeyFileError>> {
  const name = `AGENT_WEBHOOKS_SIGNING_KEY_FILE ${file}`;
  let text: string;
  try {
    const info = await stat(file);
    if ((info.mode & 0o077) !== 0) {
      return err({ code: "open_to_others", message: `${name}: group or others may read it (chmod 600)` });
    }
    text = await readFile(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    return err({ code: "unreadable", message: `${name}: cannot be read (${code})` });
  }
  const blocks = text.match(PEM_BLOCK) ?? [];
  if (blocks.length === 0)
    return err({ code: "not_a_key", message: `${name}: not a PKCS#8 PEM private key` });
  const keys: WebhookSigningKey[] = [];
  for (const [index, block] of blocks.entries()) {
    const key = keyOfBlock(block);
    if (!key) {
      return err({
        code: "not_a_key",
        message: `${name}: key ${index + 1} is not a PKCS#8 PEM Ed25519 private key`,
      });
    }
    keys.push(key);
  }
  return ok({ file, blocks, keys });
}

function keyOfBlock(block: string): WebhookSigningKey | undefined {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: block, format: "pem" });
  } catch {
    return undefined;
  }
  return privateKey.asymmetricKeyType === "ed25519" ? keyOf(privateKey) : undefined;
}

/**
 * Reads the key file (readWebhookKeyFile) for the origin's start: its keys, newest first. Throws
 * the refusal's message (never the file's content).
 */
export async function loadWebhookSigningKeys(file: string): Promise<WebhookSigningKey[]> {
  const read = await readWebhookKeyFile(file);
  if (!read.ok) throw new Error(read.error.message);
  return [...read.value.keys].reverse();
}

/**
 * Appends a new key to a key file already read and checked (a rotation's first step,
 * docs/operations.md#webhooks): origins started after it serve both public keys and sign with
 * both. Returns the new key; only writing the file can fail here.
 */
export async function addWebhookSigningKey(keyFile: WebhookKeyFile): Promise<WebhookSigningKey> {
  const { privateKey } = generateKeyPairSync("ed25519");
  const pem = privateKey.export({ format: "pem", type: "pkcs8" }) as string;
  await rewriteKeyFile(keyFile.file, [...keyFile.blocks, pem]);
  return keyOf(privateKey);
}

export type RetireKeyResult = { ok: true } | { ok: false; error: "no_such_kid" | "last_key" };

/** Removes the key `kid` from a key file already read and checked (a rotation's last step); never the only one. */
export async function retireWebhookSigningKey(
  keyFile: WebhookKeyFile,
  kid: string,
): Promise<RetireKeyResult> {
  const kept = keyFile.blocks.filter((_, index) => keyFile.keys[index]!.jwk.kid !== kid);
  if (kept.length === keyFile.blocks.length) return { ok: false, error: "no_such_kid" };
  if (kept.length === 0) return { ok: false, error: "last_key" };
  await rewriteKeyFile(keyFile.file, kept);
  return { ok: true };
}

/** How long a change of the key file waits for another one to end before it gives up. */
const KEY_FILE_LOCK_WAIT_MS = 10_000;
const KEY_FILE_LOCK_POLL_MS = 25;

/**
 * Takes `FILE.lock` (holding this process's id) for a change of the key file: held from the read
 * to the rename, so two changes at once (an add-key beside a retire-key, say) cannot each write
 * the file as they read it, one dropping the key the other added or bringing back the key the
 * other retired. Waits while a running process holds it; a lock whose process is gone (killed
 * mid-change) is refused naming it, for the operator to remove, rather than taken over by guess.
 * Returns the release.
 *
 * The lock appears with its id already in it: the id is written to `FILE.lock.PID` and that file
 * is linked to the lock's name, which fails while a lock is there. Made with O_EXCL and written
 * after, a lock whose write failed (a full disk) or whose process was killed between the two was
 * left empty, and every later change waited 10 s on it and said "held by process ?: another
 * change of the key file runs", though nothing ran.
 */
export async function lockWebhookKeyFile(
  file: string,
  waitMs = KEY_FILE_LOCK_WAIT_MS,
): Promise<Result<() => Promise<void>, { message: string }>> {
  const lock = `${file}.lock`;
  const mine = `${lock}.${process.pid}`;
  const deadline = Date.now() + waitMs;
  for (;;) {
    // Made anew for each try and removed at once, so a tool stopped while it waits leaves nothing.
    let linked: NodeJS.ErrnoException | undefined;
    try {
      await writeFile(mine, `${process.pid}\n`, { mode: 0o600 });
      await link(mine, lock);
    } catch (error) {
      linked = error as NodeJS.ErrnoException;
    } finally {
      // The lock, when taken, is its own link to the same file.
      await unlink(mine).catch(() => undefined);
    }
    if (!linked) return ok(() => unlink(lock).catch(() => undefined));
    if (linked.code !== "EEXIST") {
      return err({ message: `cannot make ${lock} (${linked.code ?? "error"})` });
    }
    const held = await readFile(lock, "utf8").catch(() => undefined);
    const holder = Number.parseInt(held ?? "", 10);
    // Never empty when a change made it: one that is was left by something that could not say
    // who it was, and nothing will remove it.
    if (held !== undefined && !(Number.isSafeInteger(holder) && holder > 0)) {
      return err({ message: `${lock} names no process: check the key file, remove the lock and run again` });
    }
    if (Number.isSafeInteger(holder) && holder > 0 && !processRuns(holder)) {
      return err({
        message: `${lock} is left by process ${holder}, which no longer runs: check the key file, remove the lock and run again`,
      });
    }
    if (Date.now() >= deadline) {
      return err({
        message: `${lock} is held by process ${holder || "?"}: another change of the key file runs`,
      });
    }
    await sleep(KEY_FILE_LOCK_POLL_MS);
  }
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user (root's change beside the service user's).
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Writes a new file beside the old one, 0600 from its creation and owned as the old one is, and
 * renames it over the old. An operator who runs the tool as root must not leave the origin's
 * service user a key file it can no longer read at its next start.
 */
async function rewriteKeyFile(file: string, blocks: readonly string[]): Promise<void> {
  const owner = await stat(file);
  const next = `${file}.${process.pid}.next`;
  await writeFile(next, blocks.map((block) => (block.endsWith("\n") ? block : `${block}\n`)).join(""), {
    mode: 0o600,
    flag: "wx",
  });
  const written = await stat(next);
  if (written.uid !== owner.uid || written.gid !== owner.gid) await chown(next, owner.uid, owner.gid);
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
