/**
 * A bare frame-level client for the enclave's integration tests: it can send any bytes (malformed
 * or oversize frames, a wrong hello) and read every frame the enclave sends back.
 */
import { connect, type Socket } from "node:net";
import { encodeFrame, FrameDecoder } from "../../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE } from "../../shared/constants.ts";
import { type EnclaveResponse, makeHello, responseSchema } from "../../shared/enclave-protocol.ts";

type Waiter = { resolve: (frame: unknown) => void; reject: (error: Error) => void };

export class RawEnclaveClient {
  private readonly frames: unknown[] = [];
  private readonly waiters: Waiter[] = [];
  private nextId = 1;
  private ended = false;
  readonly closed: Promise<void>;

  private constructor(private readonly socket: Socket) {
    const decoder = new FrameDecoder();
    socket.on("data", (chunk: Buffer) => {
      for (const event of decoder.push(chunk)) {
        this.deliver(event.kind === "frame" ? event.value : { undecodable: event.reason });
      }
    });
    this.closed = new Promise((resolve) => {
      socket.on("close", () => {
        this.ended = true;
        for (const waiter of this.waiters.splice(0)) waiter.reject(new Error("connection closed"));
        resolve();
      });
    });
    socket.on("error", () => undefined);
  }

  /** Connects and reads the enclave's hello; sends ours unless `hello` is false. */
  static async connect(
    socketPath: string,
    options: { helloProfile?: string | false } = {},
  ): Promise<{ client: RawEnclaveClient; serverHello: unknown }> {
    const socket = connect(socketPath);
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    const client = new RawEnclaveClient(socket);
    const serverHello = await client.next();
    if (options.helloProfile !== false) client.send(makeHello(options.helloProfile ?? ENCLAVE_PROFILE));
    return { client, serverHello };
  }

  /** Sends one value as a frame. */
  send(value: unknown): void {
    this.socket.write(encodeFrame(value));
  }

  /** Writes raw bytes (for malformed and oversize frames). */
  sendBytes(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  /** The next frame from the enclave (rejects if the connection closes first). */
  next(timeoutMs = 10_000): Promise<unknown> {
    const frame = this.frames.shift();
    if (frame !== undefined) return Promise.resolve(frame);
    if (this.ended) return Promise.reject(new Error("connection closed"));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no frame within timeout")), timeoutMs);
      this.waiters.push({
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
    });
  }

  /** Sends a request and returns the next response (tests send one at a time). */
  async request(op: string, params: Record<string, unknown>, cap?: unknown): Promise<EnclaveResponse> {
    const id = this.nextId++;
    this.send(cap === undefined ? { v: 1, id, op, params } : { v: 1, id, op, params, cap });
    const response = responseSchema.parse(await this.next());
    if (response.id !== id) throw new Error(`response id ${String(response.id)} does not match ${id}`);
    return response;
  }

  /**
   * Sends every request in ONE socket write (the frames concatenated), so the enclave decodes
   * them from one chunk and starts them together, then reads one answer per request. Answers
   * are returned in request order, matched by id (the enclave may answer in any order).
   */
  async requestTogether(
    requests: Array<{ op: string; params: Record<string, unknown>; cap?: unknown }>,
  ): Promise<EnclaveResponse[]> {
    const ids = requests.map(() => this.nextId++);
    const frames = requests.map(({ op, params, cap }, index) =>
      encodeFrame({ v: 1, id: ids[index], op, params, ...(cap === undefined ? {} : { cap }) }),
    );
    const bytes = new Uint8Array(frames.reduce((total, frame) => total + frame.length, 0));
    let offset = 0;
    for (const frame of frames) {
      bytes.set(frame, offset);
      offset += frame.length;
    }
    this.socket.write(bytes);
    const byId = new Map<unknown, EnclaveResponse>();
    for (const _ of requests) {
      const response = responseSchema.parse(await this.next());
      byId.set(response.id, response);
    }
    return ids.map((id) => {
      const response = byId.get(id);
      if (!response) throw new Error(`no response for request ${id}`);
      return response;
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private deliver(frame: unknown): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve(frame);
    else this.frames.push(frame);
  }
}

/** The result of a successful response, or a thrown error describing the failure. */
export function expectOk(response: EnclaveResponse): Record<string, unknown> {
  if (!response.ok) throw new Error(`enclave refused: ${response.error.code} ${response.error.reason ?? ""}`);
  return response.result as Record<string, unknown>;
}
