/**
 * Enclave logs: JSON (pino) on stderr. Nothing here ever logs key material, capability
 * signatures, envelopes or the sealing key; call sites log ids, counts and addresses only.
 */
import pino, { type Logger } from "pino";
import { boundedLogDestination } from "../shared/node/unread-output.ts";

/**
 * A pino logger writing to stderr at `level` (default info), holding at most LOG_QUEUE_MAX_BYTES
 * for a reader that stalls (shared/node/unread-output.ts).
 */
export function createEnclaveLogger(level = "info"): Logger {
  return pino({ name: "enclave", level, base: { service: "enclave" } }, boundedLogDestination(2, "enclave"));
}
