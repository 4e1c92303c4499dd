/**
 * One client connection: the enclave sends its hello first, requires the client's
 * hello to name protocol `svc-hsm/agent/v1` and profile `agent_gateway` (else `wrong_profile` and
 * close), then serves requests concurrently, answering each with its id. A frame that does not
 * decode or is oversize gets `malformed` with id null and the connection stays open.
 *
 * A burst of requests (a client's 32 in flight arrive in one read) is handled a slice at a time,
 * one slice per turn of the event loop, and the answers of each slice leave at the end of its
 * turn: the client works on the first answers while the enclave signs the rest, instead of the two
 * processes taking turns, each idle while the other works (docs/performance.md, "The enclave").
 *
 * A connection is read only while the enclave keeps up with it: past MAX_WAITING_FRAMES frames
 * read and not yet handled, or MAX_UNSENT_BYTES of answers its client has not taken, it is not read
 * until they are down again. A client that writes faster than the enclave handles, or never reads
 * its answers, then waits in its own socket rather than in the enclave's memory.
 */
import type { Socket } from "node:net";
import type { Logger } from "pino";
import { encodeFrame, FrameDecoder, type FrameEvent, FrameTooLargeError } from "../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE, ENCLAVE_PROTOCOL } from "../shared/constants.ts";
import {
  ENCLAVE_WIRE_VERSION,
  type EnclaveResponse,
  helloSchema,
  makeHello,
} from "../shared/enclave-protocol.ts";
import { malformedFrameResponse } from "./dispatch.ts";

/** Requests handled per turn of the event loop before the answers so far are written. */
export const REQUESTS_PER_TURN = 16;

/**
 * Frames read and not yet handled, and bytes of answers not yet taken by the client, past which a
 * connection is not read. Without them a client writing 4-byte frames (each answered `malformed`,
 * about 70 bytes) and reading nothing was read as fast as it wrote: its frames waited here a
 * slice per turn, and then their answers: 17 MiB written took the enclave from 62 to 370 MB.
 */
export const MAX_WAITING_FRAMES = 16 * REQUESTS_PER_TURN;
export const MAX_UNSENT_BYTES = 1024 * 1024;

export type ConnectionDeps = {
  /** The profile this enclave announces; agent_gateway except in tests of the client's refusal. */
  announcedProfile: string;
  handle: (frame: unknown) => Promise<EnclaveResponse>;
  logger: Logger;
};

/** Serves one accepted socket until it closes. */
export function serveConnection(socket: Socket, deps: ConnectionDeps): void {
  const decoder = new FrameDecoder();
  let helloReceived = false;
  let closing = false;
  let corked = false;
  /** Decoded frames not handled yet, oldest first. */
  let waiting: FrameEvent[] = [];
  let sliceScheduled = false;

  const flush = (): void => {
    if (!corked) return;
    corked = false;
    socket.uncork();
  };

  const send = (message: unknown): void => {
    if (closing || socket.destroyed) return;
    let frame: Uint8Array;
    try {
      frame = encodeFrame(message);
    } catch (error) {
      if (!(error instanceof FrameTooLargeError)) throw error;
      frame = encodeFrame(malformedFrameResponse("response exceeds the frame limit"));
    }
    // Coalesce the responses finished in one turn of the event loop into one write.
    if (!corked) {
      corked = true;
      socket.cork();
      setImmediate(flush);
    }
    socket.write(frame);
    readWhileKeepingUp();
  };

  const readWhileKeepingUp = (): void => {
    const behind = waiting.length > MAX_WAITING_FRAMES || socket.writableLength > MAX_UNSENT_BYTES;
    if (behind && !socket.isPaused()) socket.pause();
    else if (!behind && socket.isPaused()) socket.resume();
  };

  const onHello = (value: unknown): void => {
    const hello = helloSchema.safeParse(value);
    if (hello.success && hello.data.protocol === ENCLAVE_PROTOCOL && hello.data.profile === ENCLAVE_PROFILE) {
      helloReceived = true;
      return;
    }
    deps.logger.warn("client hello refused");
    send({
      v: ENCLAVE_WIRE_VERSION,
      id: null,
      ok: false,
      error: {
        code: "wrong_profile",
        reason: `this enclave serves ${ENCLAVE_PROTOCOL} profile ${ENCLAVE_PROFILE}`,
      },
    });
    closing = true;
    socket.end();
  };

  const handle = (event: FrameEvent): void => {
    if (event.kind === "malformed") {
      send(
        malformedFrameResponse(event.reason === "oversize" ? "frame exceeds 1 MiB" : "frame does not decode"),
      );
    } else if (!helloReceived) {
      onHello(event.value);
    } else {
      deps.handle(event.value).then(send, (error: unknown) => {
        deps.logger.error({ err: String(error) }, "request handler threw");
      });
    }
  };

  /** Handles the next slice of waiting frames; the rest wait for the next turn. */
  const handleSlice = (): void => {
    for (const event of waiting.splice(0, REQUESTS_PER_TURN)) {
      if (closing) break;
      handle(event);
    }
    if (waiting.length === 0 || closing) {
      waiting = [];
    } else {
      sliceScheduled = true;
      // This slice's answers (sent from its microtasks) are written before the next slice runs.
      setImmediate(() => {
        sliceScheduled = false;
        flush();
        handleSlice();
      });
    }
    readWhileKeepingUp();
  };

  socket.on("data", (chunk: Buffer) => {
    if (closing) return;
    waiting.push(...decoder.push(chunk));
    if (!sliceScheduled) handleSlice();
    readWhileKeepingUp();
  });
  socket.on("drain", readWhileKeepingUp);
  socket.on("error", (error) => deps.logger.debug({ err: error.message }, "connection error"));
  send(makeHello(deps.announcedProfile));
}
