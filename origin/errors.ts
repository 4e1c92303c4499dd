import { ERROR_STATUS, type ErrorBody, type ErrorCode } from "../shared/error-codes.ts";

export { ERROR_STATUS, type ErrorCode };

export type AppErrorOptions = {
  cause?: unknown;
  headers?: Record<string, string>;
};

/** Thrown by routes and middleware only; app.onError turns it into the envelope (STYLE "Errors"). */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: (typeof ERROR_STATUS)[ErrorCode];
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.headers = options.headers ?? {};
  }
}

export function errorBody(code: ErrorCode, message: string, requestId: string): ErrorBody {
  return { error: { code, message, request_id: requestId } };
}
