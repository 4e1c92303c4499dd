import type { ErrorCode } from "../errors.ts";

/** A refusal the agent is told about, in the gateway's error envelope. */
export type Refusal = {
  code: ErrorCode;
  message: string;
  fields?: Record<string, string | number>;
  headers?: Record<string, string>;
};
