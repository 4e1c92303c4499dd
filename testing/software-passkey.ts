/**
 * A software WebAuthn authenticator for tests: a P-256 credential made with node:crypto that
 * answers assertions exactly as an authenticator does (authenticatorData = rpIdHash ‖ flags ‖
 * signCount, clientDataJSON with type, challenge and origin, a DER ECDSA signature over
 * authenticatorData ‖ SHA-256(clientDataJSON)) and registrations with a "none" attestation. This is
 * the protocol itself, not a mock of it; each part can be changed to make the assertion a test needs.
 */
import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from "node:crypto";
import { isoCBOR } from "@simplewebauthn/server/helpers";

type CborMap = Parameters<typeof isoCBOR.encode>[0];

import { type Hex, toHex } from "../shared/hex.ts";
import type { PasskeyApproval } from "../shared/operator-approval.ts";
import { toBase64Url } from "../shared/passkey-approval.ts";

/** The order n of the P-256 group. */
export const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
export const FLAG_UP = 0x01;
export const FLAG_UV = 0x04;
const FLAG_AT = 0x40;

export type AssertionOptions = {
  /** The flags byte; UP | UV unless given. */
  flags?: number;
  /** The authenticator's signCount; 0 (it does not count) unless given. */
  signCount?: number;
  type?: string;
  /** The origin the browser would report; the credential's own unless given. */
  origin?: string;
  /** Whether the browser reports the call as made in a cross-origin frame; false unless given. */
  crossOrigin?: boolean;
  /** The relying party the authenticator hashes; the credential's own unless given. */
  rpId?: string;
  /** Leave S as the signature came out, or force its high (n − s) or low form. */
  s?: "as-signed" | "high" | "low";
};

export type Assertion = { authenticatorData: Hex; clientDataJson: Hex; signature: Hex };

export class SoftwarePasskey {
  readonly credentialId: string;
  readonly publicKey: Hex;
  private readonly privateKey: KeyObject;

  constructor(
    readonly rpId: string,
    readonly origin: string,
  ) {
    const pair = generateKeyPairSync("ec", { namedCurve: "P-256" });
    this.privateKey = pair.privateKey;
    this.credentialId = toBase64Url(randomBytes(16));
    const jwk = createPublicKey(pair.privateKey).export({ format: "jwk" });
    this.publicKey = toHex(
      Uint8Array.from([4, ...Buffer.from(jwk.x!, "base64url"), ...Buffer.from(jwk.y!, "base64url")]),
    );
  }

  /** An assertion over `challenge` (the bytes; base64url in clientDataJSON, as a browser puts it). */
  assert(challenge: Uint8Array, options: AssertionOptions = {}): Assertion {
    const authData = Buffer.alloc(37);
    createHash("sha256")
      .update(options.rpId ?? this.rpId)
      .digest()
      .copy(authData, 0);
    authData[32] = options.flags ?? FLAG_UP | FLAG_UV;
    authData.writeUInt32BE(options.signCount ?? 0, 33);
    const clientData = Buffer.from(
      JSON.stringify({
        type: options.type ?? "webauthn.get",
        challenge: toBase64Url(challenge),
        origin: options.origin ?? this.origin,
        crossOrigin: options.crossOrigin ?? false,
      }),
    );
    const signed = Buffer.concat([authData, createHash("sha256").update(clientData).digest()]);
    const der = sign("sha256", signed, { key: this.privateKey, dsaEncoding: "der" });
    const signature = withS(new Uint8Array(der), options.s ?? "low");
    return {
      authenticatorData: toHex(authData),
      clientDataJson: toHex(clientData),
      signature: toHex(signature),
    };
  }

  /** A passkey approval of the wire's shape (shared/operator-approval.ts). */
  approval(
    keyId: string,
    counter: number,
    expiresAt: number,
    challenge: Uint8Array,
    options?: AssertionOptions,
  ): PasskeyApproval {
    return { keyId, counter, expiresAt, webauthn: this.assert(challenge, options) };
  }

  /**
   * A registration response as navigator.credentials.create() returns it (JSON form), with a
   * "none" attestation: clientDataJSON of type webauthn.create and an attestationObject whose
   * authenticatorData carries the credential id and its COSE public key.
   */
  registrationResponse(challenge: string): Record<string, unknown> {
    const credentialId = Buffer.from(this.credentialId, "base64url");
    const point = Buffer.from(this.publicKey.slice(2), "hex");
    const cose = isoCBOR.encode(
      new Map<number, Uint8Array | number>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Uint8Array.from(point.subarray(1, 33))],
        [-3, Uint8Array.from(point.subarray(33))],
      ]),
    );
    const length = Buffer.alloc(2);
    length.writeUInt16BE(credentialId.length);
    const authData = Buffer.concat([
      createHash("sha256").update(this.rpId).digest(),
      Buffer.from([FLAG_UP | FLAG_UV | FLAG_AT]),
      Buffer.alloc(4),
      Buffer.alloc(16),
      length,
      credentialId,
      cose,
    ]);
    const attestationObject = isoCBOR.encode(
      new Map<string, CborMap>([
        ["fmt", "none"],
        ["attStmt", new Map<string, CborMap>()],
        ["authData", Uint8Array.from(authData)],
      ]),
    );
    const clientData = Buffer.from(
      JSON.stringify({ type: "webauthn.create", challenge, origin: this.origin, crossOrigin: false }),
    );
    return {
      id: this.credentialId,
      rawId: this.credentialId,
      type: "public-key",
      response: {
        clientDataJSON: clientData.toString("base64url"),
        attestationObject: Buffer.from(attestationObject).toString("base64url"),
        transports: ["internal"],
      },
      clientExtensionResults: {},
      authenticatorAttachment: "platform",
    };
  }
}

/** The DER signature with S in the form asked (n − s flips it; both verify). */
export function withS(der: Uint8Array, form: "as-signed" | "high" | "low"): Uint8Array {
  const rLength = der[3]!;
  const r = der.subarray(4, 4 + rLength);
  const sStart = 4 + rLength + 2;
  let s = BigInt(`0x${Buffer.from(der.subarray(sStart)).toString("hex")}`);
  const high = s > P256_N / 2n;
  if ((form === "high" && !high) || (form === "low" && high)) s = P256_N - s;
  return derOf(r, s);
}

function derOf(r: Uint8Array, s: bigint): Uint8Array {
  const integer = (bytes: Uint8Array): Buffer => {
    let start = 0;
    while (start < bytes.length - 1 && bytes[start] === 0 && bytes[start + 1]! < 0x80) start++;
    const trimmed = Buffer.from(bytes.subarray(start));
    const body = trimmed[0]! >= 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed;
    return Buffer.concat([Buffer.from([0x02, body.length]), body]);
  };
  const sHex = s.toString(16).padStart(64, "0");
  const body = Buffer.concat([integer(r), integer(Buffer.from(sHex, "hex"))]);
  return Uint8Array.from(Buffer.concat([Buffer.from([0x30, body.length]), body]));
}
