/**
 * The low-S form of a DER ECDSA P-256 signature. Authenticators sign with either S; the enclave
 * takes only the low one (s ≤ n/2), so that an assertion has one valid encoding. n − s of a valid
 * signature is valid too, so the relay may turn one into the other without any key: it changes
 * nothing that is signed.
 */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** The signature with S ≤ n/2, re-encoded; null when it is not a DER signature of two integers. */
export function lowSDer(der: Uint8Array): Uint8Array | null {
  if (der.length < 8 || der[0] !== 0x30 || der[1] !== der.length - 2 || der[2] !== 0x02) return null;
  const rLength = der[3]!;
  const at = 4 + rLength;
  if (der[at] !== 0x02 || at + 2 + der[at + 1]! !== der.length) return null;
  const r = der.subarray(4, at);
  let s = 0n;
  for (const byte of der.subarray(at + 2)) s = (s << 8n) | BigInt(byte);
  if (s <= P256_N / 2n) return der;
  return encode(r, P256_N - s);
}

function encode(r: Uint8Array, s: bigint): Uint8Array {
  const integer = (bytes: Uint8Array): number[] => {
    let start = 0;
    while (start < bytes.length - 1 && bytes[start] === 0 && bytes[start + 1]! < 0x80) start++;
    const trimmed = [...bytes.subarray(start)];
    const body = trimmed[0]! >= 0x80 ? [0, ...trimmed] : trimmed;
    return [0x02, body.length, ...body];
  };
  const sBytes = Uint8Array.from(
    s
      .toString(16)
      .padStart(64, "0")
      .match(/../g)!
      .map((pair) => Number.parseInt(pair, 16)),
  );
  const body = [...integer(r), ...integer(sBytes)];
  return Uint8Array.from([0x30, body.length, ...body]);
}
