/**
 * Framing of the enclave socket: each frame is a 4-byte big-endian length followed by
 * exactly one CBOR item (cbor-x), at most 1 MiB. The decoder is incremental: bytes arrive in
 * arbitrary chunks, and a frame that does not decode or declares an oversize length becomes a
 * `malformed` event (an oversize frame's bytes are skipped) so the stream stays usable.
 * Runtime-neutral: no `node:` imports.
 */
import { Decoder, Encoder } from "cbor-x";

/** A frame carries at most 1 MiB of CBOR. */
export const MAX_FRAME_BYTES = 1024 * 1024;
const HEADER_BYTES = 4;

// Plain CBOR maps both ways (no cbor-x record extension), so any CBOR peer can talk to us.
const encoder = new Encoder({
  useRecords: false,
  mapsAsObjects: true,
  tagUint8Array: false,
  variableMapSize: true,
});
const decoder = new Decoder({ useRecords: false, mapsAsObjects: true });

export type FrameEvent =
  | { kind: "frame"; value: unknown }
  | { kind: "malformed"; reason: "undecodable" | "oversize" };

/** Thrown when a caller tries to send a value whose encoding exceeds the frame limit (a bug). */
export class FrameTooLargeError extends Error {
  override readonly name = "FrameTooLargeError";
}

/** Encodes one CBOR value with cbor-x (no framing). */
export function encodeCbor(value: unknown): Uint8Array {
  return encoder.encode(value);
}

/** Decodes exactly one CBOR item; throws on trailing bytes or invalid CBOR. */
export function decodeCbor(bytes: Uint8Array): unknown {
  return decoder.decode(bytes);
}

/** Encodes `value` as one frame: 4-byte big-endian length ‖ CBOR. */
export function encodeFrame(value: unknown): Uint8Array {
  const payload = encoder.encode(value);
  if (payload.length > MAX_FRAME_BYTES) {
    throw new FrameTooLargeError(`frame of ${payload.length} bytes exceeds ${MAX_FRAME_BYTES}`);
  }
  const frame = new Uint8Array(HEADER_BYTES + payload.length);
  new DataView(frame.buffer).setUint32(0, payload.length, false);
  frame.set(payload, HEADER_BYTES);
  return frame;
}

/** Incremental decoder for one byte stream; keep one instance per connection. */
export class FrameDecoder {
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  private skipRemaining = 0;
  private readonly maxFrameBytes: number;

  constructor(options: { maxFrameBytes?: number } = {}) {
    this.maxFrameBytes = options.maxFrameBytes ?? MAX_FRAME_BYTES;
  }

  /** Feeds bytes; returns the frames (and malformed events) completed by them, in order. */
  push(chunk: Uint8Array): FrameEvent[] {
    const events: FrameEvent[] = [];
    let input = chunk;
    if (this.skipRemaining > 0) {
      const skipped = Math.min(this.skipRemaining, input.length);
      this.skipRemaining -= skipped;
      input = input.subarray(skipped);
    }
    if (input.length > 0) {
      this.chunks.push(input);
      this.buffered += input.length;
    }
    for (;;) {
      if (this.skipRemaining > 0) {
        this.skipRemaining -= this.discard(Math.min(this.skipRemaining, this.buffered));
        if (this.skipRemaining > 0) break;
      }
      if (this.buffered < HEADER_BYTES) break;
      const length = this.peekLength();
      if (length > this.maxFrameBytes) {
        // Answer malformed once and skip the declared bytes.
        this.discard(HEADER_BYTES);
        this.skipRemaining = length;
        events.push({ kind: "malformed", reason: "oversize" });
        continue;
      }
      if (this.buffered < HEADER_BYTES + length) break;
      this.discard(HEADER_BYTES);
      const payload = this.take(length);
      events.push(decodePayload(payload));
    }
    return events;
  }

  private peekLength(): number {
    const header = new Uint8Array(HEADER_BYTES);
    let filled = 0;
    for (const chunk of this.chunks) {
      const part = chunk.subarray(0, HEADER_BYTES - filled);
      header.set(part, filled);
      filled += part.length;
      if (filled === HEADER_BYTES) break;
    }
    return new DataView(header.buffer).getUint32(0, false);
  }

  /** Removes up to `count` buffered bytes; returns how many were removed. */
  private discard(count: number): number {
    let remaining = count;
    while (remaining > 0 && this.chunks.length > 0) {
      const first = this.chunks[0]!;
      if (first.length <= remaining) {
        this.chunks.shift();
        remaining -= first.length;
      } else {
        this.chunks[0] = first.subarray(remaining);
        remaining = 0;
      }
    }
    const removed = count - remaining;
    this.buffered -= removed;
    return removed;
  }

  private take(count: number): Uint8Array {
    const first = this.chunks[0];
    if (first && first.length >= count) {
      // Common case: the whole payload sits in one chunk; avoid a copy.
      const payload = first.subarray(0, count);
      this.discard(count);
      return payload;
    }
    const payload = new Uint8Array(count);
    let filled = 0;
    while (filled < count) {
      const chunk = this.chunks[0]!;
      const part = chunk.subarray(0, count - filled);
      payload.set(part, filled);
      filled += part.length;
      this.discard(part.length);
    }
    return payload;
  }
}

function decodePayload(payload: Uint8Array): FrameEvent {
  if (payload.length === 0) return { kind: "malformed", reason: "undecodable" };
  try {
    return { kind: "frame", value: decoder.decode(payload) };
  } catch {
    return { kind: "malformed", reason: "undecodable" };
  }
}
