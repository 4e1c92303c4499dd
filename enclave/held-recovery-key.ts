/**
 * The recovery encryption key while a drill or a recovery restores backups into this enclave
 * (load_recovery_key): held in this process's memory only, as the HPKE library's key object,
 * never serialised or written. It is forgotten after LIFETIME_MS, when another is loaded, and at
 * a restart, like the transport keys it arrives under (transport-keys.ts). Holding it grants
 * nothing by itself: restore_backup still needs a recovery capability.
 */
import type { TransportPrivateKey } from "../shared/recovery-envelope.ts";

/** As long as a transport key lives: one drill or recovery session. */
const LIFETIME_MS = 60 * 60 * 1000;

export class HeldRecoveryKey {
  private held: { privateKey: TransportPrivateKey; expiresAt: number } | null = null;

  /** Holds `privateKey` (already checked against the sealed public key); returns when it is forgotten. */
  hold(privateKey: TransportPrivateKey, now: Date): Date {
    const expiresAt = now.getTime() + LIFETIME_MS;
    this.held = { privateKey, expiresAt };
    return new Date(expiresAt);
  }

  /** The held key, or undefined when none was loaded or it expired. */
  privateKey(now: Date): TransportPrivateKey | undefined {
    if (this.held && this.held.expiresAt <= now.getTime()) this.held = null;
    return this.held?.privateKey;
  }
}
