/**
 * Enclave logs: JSON (pino) on stderr. Nothing here ever logs key material, capability
 * signatures, envelopes or the sealing key; call sites log ids, counts and addresses only.
 */
import pino, { type Logger } from "pino";

/** A pino logger writing to stderr at `level` (default info). */
export function createEnclaveLogger(level = "info"): Logger {
  return pino({ name: "enclave", level, base: { service: "enclave" } }, pino.destination(2));
}
