/**
 * Transport keys of restores into this enclave (docs/operations.md, "Disaster recovery"): X25519 key pairs
 * made on request and held in this process's memory only (the private half is never serialised or written). A
 * restart forgets them all, so a restore package made for an earlier run no longer opens. Each lives an
 * hour; at most MAX_LIVE are kept (the oldest is forgotten first), since asking for one needs no
 * capability.
 */
import { type Hex, toHex } from "../shared/hex.ts";
import { generateTransportKeyPair, type TransportPrivateKey } from "../shared/recovery-envelope.ts";

const LIFETIME_MS = 60 * 60 * 1000;
const MAX_LIVE = 32;

type Held = { privateKey: TransportPrivateKey; expiresAt: number };

export class TransportKeys {
  private readonly held = new Map<Hex, Held>();

  /** A fresh key pair; returns its public key and when it stops being accepted. */
  async create(now: Date): Promise<{ publicKey: Uint8Array; expiresAt: Date }> {
    this.forgetExpired(now);
    const pair = await generateTransportKeyPair();
    const expiresAt = now.getTime() + LIFETIME_MS;
    this.held.set(toHex(pair.publicKey), { privateKey: pair.privateKey, expiresAt });
    while (this.held.size > MAX_LIVE) {
      const oldest = this.held.keys().next().value as Hex;
      this.held.delete(oldest);
    }
    return { publicKey: pair.publicKey, expiresAt: new Date(expiresAt) };
  }

  /** The private half of a live transport key, or undefined when unknown, forgotten or expired. */
  privateKeyOf(publicKey: Uint8Array, now: Date): TransportPrivateKey | undefined {
    this.forgetExpired(now);
    return this.held.get(toHex(publicKey))?.privateKey;
  }

  private forgetExpired(now: Date): void {
    for (const [key, held] of this.held) if (held.expiresAt <= now.getTime()) this.held.delete(key);
  }
}
