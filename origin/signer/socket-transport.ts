/**
 * One multiplexed connection to the enclave socket (docs/enclave.md): hello handshake pinned to profile
 * `agent_gateway`, requests matched to replies by id, a timeout per request, and lazy reconnection
 * with exponential backoff. Outcomes are data, never exceptions; the caller classifies the codes.
 */
import { connect, type Socket } from "node:net";
import type { Logger } from "pino";
import { encodeFrame, FrameDecoder, FrameTooLargeError } from "../../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE, ENCLAVE_PROTOCOL } from "../../shared/constants.ts";
import {
  ENCLAVE_WIRE_VERSION,
  helloSchema,
  makeHello,
  type RefusalDetail,
  responseSchema,
} from "../../shared/enclave-protocol.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { CLIENT_FAILURE } from "./failure-class.ts";

export type TransportError = { code: string; reason: string; detail?: RefusalDetail; rule?: string };
export type TransportFailure = { ok: false; error: TransportError };
export type TransportOutcome = Result<unknown, TransportError>;

export type SocketTransportOptions = {
  socketPath: string;
  /** Time allowed for connect plus hello exchange. */
  connectTimeoutMs?: number;
  /** First delay after a failed or lost connection; doubles up to maxMs, reset by a good hello. */
  backoff?: { initialMs: number; maxMs: number };
  logger?: Logger;
};

type Pending = {
  frame: Uint8Array;
  timer: NodeJS.Timeout;
  settle: (outcome: TransportOutcome) => void;
};

type State = "idle" | "connecting" | "ready" | "backoff" | "closed";

const fail = (code: string, reason: string): TransportFailure => err({ code, reason });

export class SocketTransport {
  private state: State = "idle";
  private socket: Socket | null = null;
  private readonly queued = new Map<number, Pending>();
  private readonly inflight = new Map<number, Pending>();
  private nextId = 1;
  private attempts = 0;
  private backoffTimer: NodeJS.Timeout | null = null;
  /** Why the current connection attempt failed, reported to requests waiting for it. */
  private handshakeFailure: TransportFailure | null = null;
  private readonly connectTimeoutMs: number;
  private readonly backoff: { initialMs: number; maxMs: number };

  constructor(private readonly options: SocketTransportOptions) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 2_000;
    this.backoff = options.backoff ?? { initialMs: 100, maxMs: 5_000 };
  }

  /** Sends one request and resolves with its reply or a client-side failure. */
  request(
    op: string,
    params: Record<string, unknown>,
    cap: unknown,
    timeoutMs: number,
  ): Promise<TransportOutcome> {
    if (this.state === "closed") return Promise.resolve(fail(CLIENT_FAILURE.clientClosed, "client closed"));
    const id = this.nextId++;
    let frame: Uint8Array;
    try {
      frame = encodeFrame({ v: ENCLAVE_WIRE_VERSION, id, op, params, ...(cap === undefined ? {} : { cap }) });
    } catch (error) {
      if (!(error instanceof FrameTooLargeError)) throw error;
      return Promise.resolve(fail(CLIENT_FAILURE.requestTooLarge, "request exceeds the frame limit"));
    }
    return new Promise<TransportOutcome>((resolve) => {
      const timer = setTimeout(() => {
        this.queued.delete(id);
        this.inflight.delete(id);
        resolve(fail(CLIENT_FAILURE.timeout, `no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      const pending: Pending = {
        frame,
        timer,
        settle: (outcome) => {
          clearTimeout(timer);
          resolve(outcome);
        },
      };
      if (this.state === "ready" && this.socket) {
        this.inflight.set(id, pending);
        this.send(this.socket, frame);
        return;
      }
      this.queued.set(id, pending);
      if (this.state === "idle") this.connect();
    });
  }

  /**
   * Writes a frame; the frames of one turn of the event loop (a batch's signatures, say) leave in
   * one write, as the enclave's replies do (enclave/connection.ts), instead of one system call each.
   */
  private send(socket: Socket, frame: Uint8Array): void {
    if (!socket.writableCorked) {
      socket.cork();
      setImmediate(() => socket.uncork());
    }
    socket.write(frame);
  }

  /** Closes the connection and fails everything pending. */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    if (this.backoffTimer) clearTimeout(this.backoffTimer);
    this.failAll(this.queued, fail(CLIENT_FAILURE.clientClosed, "client closed"));
    this.failAll(this.inflight, fail(CLIENT_FAILURE.clientClosed, "client closed"));
    const socket = this.socket;
    this.socket = null;
    if (socket && !socket.destroyed) {
      await new Promise<void>((resolve) => {
        socket.once("close", () => resolve());
        socket.destroy();
      });
    }
  }

  private connect(): void {
    this.state = "connecting";
    this.handshakeFailure = null;
    const socket = connect(this.options.socketPath);
    this.socket = socket;
    const decoder = new FrameDecoder();
    let helloReceived = false;
    const handshakeTimer = setTimeout(() => {
      this.handshakeFailure = fail(CLIENT_FAILURE.unreachable, "no hello from the enclave in time");
      socket.destroy();
    }, this.connectTimeoutMs);

    socket.on("connect", () => socket.write(encodeFrame(makeHello(ENCLAVE_PROFILE))));
    socket.on("data", (chunk: Buffer) => {
      for (const event of decoder.push(chunk)) {
        if (socket.destroyed) return;
        if (event.kind === "malformed") {
          this.abandon(
            socket,
            fail(
              helloReceived ? CLIENT_FAILURE.malformedReply : CLIENT_FAILURE.protocolMismatch,
              "undecodable frame from the enclave",
            ),
          );
        } else if (!helloReceived) {
          const refusal = this.checkHello(event.value);
          if (refusal) {
            this.handshakeFailure = refusal;
            this.options.logger?.warn({ code: refusal.error.code }, "enclave hello refused");
            socket.destroy();
            return;
          }
          helloReceived = true;
          clearTimeout(handshakeTimer);
          this.onReady(socket);
        } else {
          this.onReply(socket, event.value);
        }
      }
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      this.handshakeFailure ??= fail(
        CLIENT_FAILURE.unreachable,
        `cannot reach the enclave (${error.code ?? "error"})`,
      );
    });
    socket.on("close", () => {
      clearTimeout(handshakeTimer);
      this.onClose(socket, helloReceived);
    });
  }

  /** The first frame must be hello for svc-hsm/agent/v1, profile agent_gateway. */
  private checkHello(value: unknown): TransportFailure | null {
    const refusal = responseSchema.safeParse(value);
    if (refusal.success && !refusal.data.ok && refusal.data.error.code === "wrong_profile") {
      return fail("wrong_profile", "the enclave refused our profile");
    }
    const hello = helloSchema.safeParse(value);
    if (!hello.success || hello.data.protocol !== ENCLAVE_PROTOCOL) {
      return fail(CLIENT_FAILURE.protocolMismatch, "the peer is not a svc-hsm/agent/v1 enclave");
    }
    if (hello.data.profile !== ENCLAVE_PROFILE) {
      return fail("wrong_profile", `the enclave announced profile ${hello.data.profile}`);
    }
    return null;
  }

  private onReady(socket: Socket): void {
    this.state = "ready";
    this.attempts = 0;
    for (const [id, pending] of this.queued) {
      this.inflight.set(id, pending);
      this.send(socket, pending.frame);
    }
    this.queued.clear();
  }

  private onReply(socket: Socket, value: unknown): void {
    const parsed = responseSchema.safeParse(value);
    if (!parsed.success) {
      const id = typeof value === "object" && value !== null && "id" in value ? value.id : undefined;
      const pending = typeof id === "number" ? this.inflight.get(id) : undefined;
      if (pending && typeof id === "number") {
        this.inflight.delete(id);
        pending.settle(fail(CLIENT_FAILURE.malformedReply, "reply does not match the protocol"));
      } else {
        this.abandon(socket, fail(CLIENT_FAILURE.malformedReply, "unattributable reply from the enclave"));
      }
      return;
    }
    const reply = parsed.data;
    if (!reply.ok && reply.id === null) {
      // A notice about a frame the enclave could not attribute to a request.
      this.options.logger?.warn({ code: reply.error.code }, "enclave notice without request id");
      if (reply.error.code === "wrong_profile")
        this.abandon(socket, fail("wrong_profile", "the enclave refused our profile"));
      return;
    }
    const pending = typeof reply.id === "number" ? this.inflight.get(reply.id) : undefined;
    if (!pending || typeof reply.id !== "number") return; // late reply after a timeout
    this.inflight.delete(reply.id);
    pending.settle(
      reply.ok
        ? ok(reply.result)
        : err({
            code: reply.error.code,
            reason: reply.error.reason ?? reply.error.code,
            ...(reply.error.detail === undefined ? {} : { detail: reply.error.detail }),
            ...(reply.error.rule === undefined ? {} : { rule: reply.error.rule }),
          }),
    );
  }

  /** The stream can no longer be trusted: fail what is in flight and drop the connection. */
  private abandon(socket: Socket, outcome: TransportFailure): void {
    this.handshakeFailure ??= outcome;
    this.failAll(this.inflight, outcome);
    socket.destroy();
  }

  private onClose(socket: Socket, helloReceived: boolean): void {
    if (this.socket === socket) this.socket = null;
    if (this.state === "closed") return;
    this.failAll(this.inflight, fail(CLIENT_FAILURE.connectionLost, "connection to the enclave lost"));
    if (!helloReceived) {
      // Requests that never left fail at once with the reason the attempt failed (fail fast).
      this.failAll(
        this.queued,
        this.handshakeFailure ?? fail(CLIENT_FAILURE.unreachable, "cannot reach the enclave"),
      );
    }
    const delay = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** this.attempts);
    this.attempts++;
    this.state = "backoff";
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = null;
      if (this.state !== "backoff") return;
      this.state = "idle";
      if (this.queued.size > 0) this.connect();
    }, delay);
    this.backoffTimer.unref();
  }

  private failAll(map: Map<number, Pending>, outcome: TransportOutcome): void {
    const entries = [...map.values()];
    map.clear();
    for (const pending of entries) pending.settle(outcome);
  }
}
