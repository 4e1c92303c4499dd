/** Hex encodings of the JSON-RPC wire: QUANTITY (no leading zeros) and DATA (lowercase bytes). */
import { bytesToHex } from "@ethereumjs/util";

export type Hex = `0x${string}`;

/** QUANTITY encoding: "0x0", "0x1a". */
export function quantity(value: bigint | number): Hex {
  return `0x${value.toString(16)}`;
}

/** DATA encoding: lowercase, two digits per byte, "0x" for empty. */
export function data(bytes: Uint8Array): Hex {
  return bytesToHex(bytes);
}
