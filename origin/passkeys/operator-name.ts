/**
 * An operator's name as it enters at registration (docs/operations.md#passkeys). Sessions, the
 * audit and the rule that a session registers passkeys under its own name only all compare names
 * exactly, so a name is spelled one way before it is kept: spaces around it dropped and Unicode
 * composed (NFC), so "Alice", "Alice " and an "Alice" typed with combining marks are one operator.
 * Case is kept: a name is shown as its operator wrote it, and folding case differs by language.
 */
import { AppError } from "../errors.ts";

/** C0 and C1 control characters and DEL: they would break or disguise a name in the audit and logs. */
const CONTROL_CHARACTER = /\p{Cc}/u;

/** The name as it is kept, or 400 validation_failed saying why it cannot be one. */
export function normaliseOperatorName(given: string): string {
  const name = given.trim().normalize("NFC");
  if (name.length === 0) throw new AppError("validation_failed", "the operator's name is empty");
  if (CONTROL_CHARACTER.test(name))
    throw new AppError("validation_failed", "the operator's name holds a control character");
  return name;
}
