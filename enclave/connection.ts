/**
 * One client connection: the enclave sends its hello first, requires the client's
 * hello to name protocol `svc-hsm/agent/v1` and profile `agent_gateway` (else `wrong_profile` and
 * close), then serves requests concurrently, answering each with its id. A frame that does not
 * decode or is oversize gets `malformed` with id null and the connection stays open.
 */
import type { Socket } from "node:net";
import type { Logger } from "pino";
import { encodeFrame, FrameDecoder, FrameTooLargeError } from "../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE, ENCLAVE_PROTOCOL } from "../shared/constants.ts";
import {
  ENCLAVE_WIRE_VERSION,
  type EnclaveResponse,
  helloSchema,
  makeHello,
} from "../shared/enclave-protocol.ts";
import { malformedFrameResponse } from "./dispatch.ts";

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
      setImmediate(() => {
        corked = false;
        socket.uncork();
      });
    }
    socket.write(frame);
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

  socket.on("data", (chunk: Buffer) => {
    if (closing) return;
    for (const event of decoder.push(chunk)) {
      if (closing) return;
      if (event.kind === "malformed") {
        send(
          malformedFrameResponse(
            event.reason === "oversize" ? "frame exceeds 1 MiB" : "frame does not decode",
          ),
        );
      } else if (!helloReceived) {
        onHello(event.value);
      } else {
        deps.handle(event.value).then(send, (error: unknown) => {
          deps.logger.error({ err: String(error) }, "request handler threw");
        });
      }
    }
  });
  socket.on("error", (error) => deps.logger.debug({ err: error.message }, "connection error"));
  send(makeHello(deps.announcedProfile));
}
