/**
 * The x402 payee key (docs/x402.md#offers-and-receipts): made at `init` in the `payee` namespace
 * and named in the sealed state, as configure_settler names the settler key. Its address is the
 * demo's payTo; it signs offers and receipts (ops/sign-offer-receipt.ts) and nothing else. A data
 * folder initialised before payee keys existed gets one when the enclave starts: a fresh key
 * grants nobody anything, since all it signs is bound to the sealed terms and to settlements the
 * settler key signed here.
 */
import { generateKeyMaterial, type KeyEntry, type Keystore } from "./keystore.ts";
import type { StateStore } from "./state-store.ts";

/** The payee key the state names, made now when it names none. */
export async function ensurePayeeKey(keystore: Keystore, state: StateStore, now: Date): Promise<KeyEntry> {
  const named = state.state.payeeKeyRef ? keystore.get(state.state.payeeKeyRef) : undefined;
  if (named?.namespace === "payee") return named;
  const [entry] = await keystore.add({
    namespace: "payee",
    batchId: `payee-${now.getTime()}`,
    keys: generateKeyMaterial(1),
  });
  const made = entry!;
  await state.commit((next) => {
    next.payeeKeyRef = made.keyRef;
  });
  return made;
}

/** The payee key, when the state names one the keystore holds. */
export function payeeKey(keystore: Keystore, state: StateStore): KeyEntry | undefined {
  const ref = state.state.payeeKeyRef;
  const key = ref ? keystore.get(ref) : undefined;
  return key?.namespace === "payee" ? key : undefined;
}
