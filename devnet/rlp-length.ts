/**
 * Lengths of RLP encodings, counted without encoding: what a block's size needs when its parts are
 * already encoded (chain/miner.ts).
 */

/** The RLP of a byte string: one byte below 0x80 is itself; otherwise a length prefix, then the bytes. */
export function rlpBytesLength(bytes: Uint8Array): number {
  return bytes.length === 1 && bytes[0]! < 0x80 ? 1 : prefixLength(bytes.length) + bytes.length;
}

/** The RLP of a list whose items' encodings take `payload` bytes together. */
export function rlpListLength(payload: number): number {
  return prefixLength(payload) + payload;
}

/** One byte up to 55 bytes of payload; beyond, one byte more than the payload length's big-endian bytes. */
function prefixLength(payload: number): number {
  if (payload < 56) return 1;
  let lengthBytes = 0;
  for (let n = payload; n > 0; n = Math.floor(n / 256)) lengthBytes++;
  return 1 + lengthBytes;
}
