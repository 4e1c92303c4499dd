import { ERROR_STATUS, type ErrorBody, type ErrorCode } from "../shared/error-codes.ts";

export { ERROR_STATUS, type ErrorCode };

export type AppErrorOptions = {
  cause?: unknown;
  headers?: Record<string, string>;
  /** Extra snake_case fields of the error object, e.g. `retry_after` on a 429. */
  fields?: Record<string, string | number>;
};

/** Thrown by routes and middleware only; app.onError turns it into the envelope. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: (typeof ERROR_STATUS)[ErrorCode];
  readonly headers: Record<string, string>;
  readonly fields: Record<string, string | number>;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    const status = ERROR_STATUS[code];
    // A 4xx is the answer to a client, never logged with a stack, and capturing one was about a
    // tenth of a refused request's CPU under a flood (docs/performance.md, "Floods"). A 5xx keeps its stack.
    const limit = Error.stackTraceLimit;
    if (status < 500) Error.stackTraceLimit = 0;
    try {
      super(message, { cause: options.cause });
    } finally {
      Error.stackTraceLimit = limit;
    }
    this.name = "AppError";
    this.code = code;
    this.status = status;
    this.headers = options.headers ?? {};
    this.fields = options.fields ?? {};
  }
}

export function errorBody(
  code: ErrorCode,
  message: string,
  requestId: string,
  fields: Record<string, string | number> = {},
): ErrorBody {
  return { error: { ...fields, code, message, request_id: requestId } };
}
