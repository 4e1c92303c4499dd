/**
 * Mints one enclave capability for an operator, e.g. a recovery-tier restore_backup
 * for the restore drill with the offline recovery key. Prints the capability as JSON (its fields
 * are strings and integers, the same map the CBOR wire carries).
 *
 *   npm run mint-capability -- --authority-key KEY --op restore_backup --env-id dev \
 *     --params '{}' --bytes-param package=batch.package --socket .data/enclave.sock
 *
 * --params is the exact wire params (snake_case, amounts as decimal strings); --bytes-param adds
 * a byte-string param from a file. The capability is good for one enclave instance only: its
 * instance id comes from --instance-id (printed by that enclave's `init`, or its
 * get_sealed_identity) or, with --socket, from the enclave itself. The counter comes from
 * --counter or, with --socket, from the enclave's capability_counter. Exit codes:
 * docs/operations.md#exit-codes-of-the-operator-tools.
 */
import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import * as z from "zod";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import type { SignerFailure } from "../origin/signer/types.ts";
import { authorityPublicKey, instanceIdSchema, mintCapability } from "../shared/capability.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { isPrivilegedOp, PRIVILEGED_OP_SCOPE } from "../shared/enclave-protocol.ts";
import {
  type CliOutcome,
  DONE,
  errored,
  readArgumentBytes,
  readArgumentFile,
  refused,
  runCli,
  UsageError,
} from "./lib/cli-shell.ts";
import { enclaveUnreachable, operatorSignerClient } from "./lib/enclave-unreachable.ts";
import { checkSocketFlag } from "./lib/policy-cli-args.ts";

const USAGE = `usage: npm run mint-capability -- --authority-key PATH --op OP --env-id ID
  (--params JSON | --params-file PATH) [--bytes-param NAME=FILE]...
  (--instance-id HEX --counter N | --socket PATH) [--request-id ID] [--chain-id ${CHAIN_ID}] [--out PATH]
  --instance-id and --counter each override what --socket would ask the enclave for.`;

async function run(argv: string[]): Promise<CliOutcome> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      "authority-key": { type: "string" },
      op: { type: "string" },
      "env-id": { type: "string" },
      params: { type: "string" },
      "params-file": { type: "string" },
      "bytes-param": { type: "string", multiple: true },
      counter: { type: "string" },
      "instance-id": { type: "string" },
      socket: { type: "string" },
      "request-id": { type: "string" },
      "chain-id": { type: "string" },
      out: { type: "string" },
    },
  });
  checkSocketFlag(values.socket);
  const op = values.op ?? "";
  if (
    !values["authority-key"] ||
    !isPrivilegedOp(op) ||
    !values["env-id"] ||
    (!values.counter && !values.socket) ||
    (!values["instance-id"] && !values.socket)
  ) {
    throw new UsageError(
      "--authority-key, a privileged --op, --env-id, and --socket or both --instance-id and --counter are required",
    );
  }
  // Both would sign the file's params and pass over the line's.
  if (values.params !== undefined && values["params-file"] !== undefined) {
    throw new UsageError("give --params or --params-file, not both");
  }
  if (values["instance-id"] !== undefined && !instanceIdSchema.safeParse(values["instance-id"]).success) {
    throw new UsageError("--instance-id must be 0x and 32 lowercase hex digits, as init prints it");
  }
  // Whole decimal numbers only: Number() would take 1e3, 0x10 or " 5" and sign another counter
  // than the one typed, and a chain id it cannot read (abc, 77.5) ended as an error, exit 3.
  const counterGiven = values.counter === undefined ? undefined : wholeNumber(values.counter, "--counter", 1);
  const chainId =
    values["chain-id"] === undefined ? CHAIN_ID : wholeNumber(values["chain-id"], "--chain-id", 1);
  const paramsText = values["params-file"]
    ? await readArgumentFile("--params-file", values["params-file"], "text", (file) => readFile(file, "utf8"))
    : (values.params ?? "{}");
  const params = paramsOf(paramsText);
  for (const entry of values["bytes-param"] ?? []) {
    // Split at the first `=` only: a file's path may hold one too.
    const at = entry.indexOf("=");
    const [name, file] = at < 0 ? [entry, ""] : [entry.slice(0, at), entry.slice(at + 1)];
    if (!name || !file) throw new UsageError(`--bytes-param ${entry}: expected NAME=FILE`);
    params[name] = await readArgumentBytes("--bytes-param", file);
  }
  const authoritySecret = await readArgumentFile(
    "--authority-key",
    values["authority-key"],
    "a 32-byte hex seed",
    readAuthoritySecret,
  );
  let counter = counterGiven ?? 0;
  let instanceId = values["instance-id"] ?? "";
  if (!counter || !instanceId) {
    const client = operatorSignerClient(values.socket!);
    try {
      if (!instanceId) {
        const identity = await client.getSealedIdentity();
        if (!identity.ok) return signerFailure("get_sealed_identity", identity.error);
        instanceId = identity.value.instanceId;
      }
      if (!counter) {
        const next = await client.capabilityCounter({
          authority: authorityPublicKey(authoritySecret),
          scope: PRIVILEGED_OP_SCOPE[op],
          op,
        });
        if (!next.ok) return signerFailure("capability_counter", next.error);
        counter = next.value.nextCounter;
      }
    } finally {
      await client.close();
    }
  }
  const capability = mintCapability({
    authoritySecret,
    op,
    params,
    requestId: values["request-id"] ?? `${op}-${randomUUID()}`,
    chainId,
    envId: values["env-id"],
    instanceId,
    counter,
  });
  const text = `${JSON.stringify(capability)}\n`;
  if (!values.out) {
    process.stdout.write(text);
    return DONE;
  }
  // A capability authorizes its op until the enclave takes it: a new 0600 file only. Over an
  // existing file the mode would be that file's (0644, say), readable by others.
  try {
    await writeFile(values.out, text, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return refused(`${values.out} exists; refusing to overwrite it`);
  }
  return DONE;
}

/** A whole decimal number from `min` up to the largest a capability carries, or a usage error. */
function wholeNumber(text: string, flag: string, min: number): number {
  const value = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`${flag} must be a whole number from ${min} to ${Number.MAX_SAFE_INTEGER}`);
  }
  return value;
}

/** --params as the wire params: a JSON object, or a usage error. */
function paramsOf(text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError("--params (or --params-file) is not JSON");
  }
  const record = z.record(z.string(), z.unknown()).safeParse(parsed);
  if (!record.success) throw new UsageError("--params (or --params-file) must be a JSON object");
  return record.data;
}

function signerFailure(op: string, failure: SignerFailure): CliOutcome {
  const message = `${op} failed: ${failure.code} ${failure.reason}`;
  return enclaveUnreachable(failure) ? errored(message) : refused(message);
}

runCli({ name: "mint-capability", usage: USAGE, run });
