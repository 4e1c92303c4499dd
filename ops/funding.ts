/**
 * `npm run funding -- <command>`: pre-restore funding exceptions (docs/api.md, "The funding gate"). A wallet
 * whose key batch has no restore evidence may hold funds only under an active `approved_non_zero` exception,
 * up to its ceiling, until it expires. Uses the node's configuration (DATABASE_URL, or the
 * embedded cluster of the running stack). HELP below is what `--help` prints, and a usage error
 * after its message (docs/operations.md#exit-codes-of-the-operator-tools).
 */

import { parseArgs } from "node:util";
import { eq } from "drizzle-orm";
import { openDatabase } from "../origin/db/open.ts";
import { agentIdentities } from "../origin/db/schema.ts";
import {
  type ExceptionResult,
  type FundingException,
  grantException,
  listExceptions,
  revokeException,
} from "../origin/funding/exceptions.ts";
import { isUuid } from "../shared/uuid.ts";
import {
  type CliContext,
  type CliOutcome,
  DONE,
  refused,
  refuseFlagsNotTaken,
  runCli,
  UsageError,
} from "./lib/cli-shell.ts";
import { nodeConfig } from "./lib/node-config.ts";

const DURATION = /^(\d+)(m|h|d)$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * What a ceiling is, as the funding gate applies it (origin/funding/gate.ts evaluateWalletGate,
 * called with the balance after the move by the faucet and transfer checks).
 */
const HELP = `usage: npm run funding -- <command> [options]

Pre-restore funding exceptions. Until a restore drill has reproduced a wallet's key batch, no faucet
payout or transfer may move funds into or out of that wallet, another agent's transfer into it
included (funding_gate_closed, no_restore_evidence; x402 payments skip this gate), unless an
operator grants it an exception for a while.

commands:
  grant (--agent ID | --wallet ADDR) --ceiling UNITS (--expires-in 24h | --expires-at ISO) --reason TEXT
      lets the wallet take faucet payouts, receive other agents' transfers and send transfers as long
      as its balance AFTER the move is at most UNITS (6-decimal units: 5000000 = 5 USDC).
      The ceiling caps what the wallet holds, not what it moves: a payout or a transfer to it may
      fill it up to the ceiling (counting what is already on its way to it); a transfer from it is
      allowed only if what stays behind (its balance less its pending transfers, the amount and the
      maximum fee) is at most the ceiling, so a wallet above its ceiling may only send enough to
      come down to it.
      With several active exceptions the highest ceiling applies. --expires-in takes 30m, 24h or 7d.
      Refused for an address that is no agent's wallet and for a revoked agent.
  list [--all]
      every active exception (--all: the newest 1000, expired and revoked ones too), as JSON
  revoke --id ID --reason TEXT
      ends an exception now (with no other active one, no funds move again)

Every grant and revoke is recorded with before, after and the reason, and shown in the console's
audit. An expired exception is the same as none. Once a drill has restored the wallet's batch the
gate lifts and no exception is needed.

exit codes: 0 done, 1 refused (not found, revoked, already revoked), 2 usage, 3 error (the database could
not be reached, or another failure to finish)`;

/** The flags each command takes; another is a usage error. */
const TAKES = {
  grant: ["wallet", "agent", "ceiling", "expires-in", "expires-at", "reason"],
  list: ["all"],
  revoke: ["id", "reason"],
} as const satisfies Record<string, readonly string[]>;

/** Whose wallet a grant is for: an address as given, or an agent's, looked up. */
type GrantTarget = { wallet: string } | { agentId: string };

/** A command line of this tool, every argument checked: nothing is opened for a bad one. */
type FundingCommand =
  | { command: "help" }
  | { command: "list"; all: boolean }
  | { command: "revoke"; id: string; reason: string }
  | { command: "grant"; target: GrantTarget; ceilingUnits: bigint; expiresAt: Date; reason: string };

function parseCommand(argv: string[]): FundingCommand {
  const [command, ...rest] = argv;
  if (command === "--help" || command === "-h" || command === "help") return { command: "help" };
  const { values } = parseArgs({
    args: rest,
    options: {
      wallet: { type: "string" },
      agent: { type: "string" },
      ceiling: { type: "string" },
      "expires-in": { type: "string" },
      "expires-at": { type: "string" },
      reason: { type: "string" },
      id: { type: "string" },
      all: { type: "boolean" },
    },
    strict: true,
  });
  if (!command || !["grant", "list", "revoke"].includes(command)) {
    throw new UsageError(command ? `unknown command ${command}` : "no command");
  }
  // `list --wallet ADDR` lists every exception, not that wallet's: refused rather than passed over.
  refuseFlagsNotTaken(command, values, TAKES[command as keyof typeof TAKES]);
  if (command === "list") return { command, all: values.all ?? false };
  if (!values.reason?.trim()) throw new UsageError("--reason is required");
  if (command === "revoke") {
    if (!values.id || !isUuid(values.id)) throw new UsageError("--id must be an exception id (a UUID)");
    return { command, id: values.id, reason: values.reason };
  }
  if (!values.ceiling || !/^\d{1,30}$/.test(values.ceiling)) {
    throw new UsageError("--ceiling must be a whole number of 6-decimal units");
  }
  return {
    command: "grant",
    target: grantTarget(values),
    ceilingUnits: BigInt(values.ceiling),
    expiresAt: expiry(values["expires-in"], values["expires-at"]),
    reason: values.reason,
  };
}

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  // Checked before the database is opened: a mistyped line must not start (or create) the embedded
  // cluster only to be told so.
  const parsed = parseCommand(argv);
  if (parsed.command === "help") {
    process.stdout.write(`${HELP}\n`);
    return DONE;
  }
  const database = await openDatabase(nodeConfig(env), 2);
  try {
    const { db } = database;
    if (parsed.command === "list") {
      const exceptions = await listExceptions(db, { all: parsed.all });
      process.stdout.write(`${JSON.stringify(exceptions.map(toWire), null, 2)}\n`);
      return DONE;
    }
    let result: ExceptionResult;
    if (parsed.command === "revoke") {
      result = await revokeException(db, { id: parsed.id, reason: parsed.reason });
    } else {
      const { target, ceilingUnits, expiresAt, reason } = parsed;
      const grantee = await granteeOf(db, target);
      if ("refusal" in grantee) return refused(grantee.refusal);
      result = await grantException(db, { wallet: grantee.wallet, ceilingUnits, expiresAt, reason });
    }
    if (!result.ok) {
      if (result.error.code === "invalid") throw new UsageError(result.error.message);
      return refused(result.error.message);
    }
    process.stdout.write(
      `${JSON.stringify({ [parsed.command === "grant" ? "granted" : "revoked"]: toWire(result.value) })}\n`,
    );
    return DONE;
  } finally {
    await database.close();
  }
}

function grantTarget(values: { wallet?: string; agent?: string }): GrantTarget {
  if (values.wallet && values.agent) throw new UsageError("give --wallet or --agent, not both");
  if (values.wallet) {
    if (!/^0x[0-9a-fA-F]{40}$/.test(values.wallet))
      throw new UsageError("--wallet must be a 20-byte hex address");
    return { wallet: values.wallet.toLowerCase() };
  }
  if (!values.agent || !isUuid(values.agent)) throw new UsageError("--wallet ADDR or --agent ID is required");
  return { agentId: values.agent };
}

/**
 * The wallet a grant is for, once it is known to be an agent's that may still move funds. A
 * well-formed id or address the node does not know is the tool's "no", not a typing mistake; so is
 * an address that is no agent's (the gate holds the service's wallets only, so its exception would
 * let nothing move) and a revoked agent's (nothing moves for it again, whatever its ceiling).
 */
async function granteeOf(
  db: Awaited<ReturnType<typeof openDatabase>>["db"],
  target: GrantTarget,
): Promise<{ wallet: string } | { refusal: string }> {
  const [identity] = await db
    .select({
      agentId: agentIdentities.agentId,
      wallet: agentIdentities.assignedWallet,
      revoked: agentIdentities.revoked,
    })
    .from(agentIdentities)
    .where(
      "wallet" in target
        ? eq(agentIdentities.assignedWallet, target.wallet)
        : eq(agentIdentities.agentId, target.agentId),
    );
  if (!identity) {
    return {
      refusal:
        "wallet" in target
          ? `no agent's wallet is ${target.wallet}: the funding gate holds this service's wallets only`
          : `no agent ${target.agentId}`,
    };
  }
  if (identity.revoked) {
    return {
      refusal: `agent ${identity.agentId} is revoked: no funds move for its wallet ${identity.wallet} again`,
    };
  }
  return { wallet: identity.wallet };
}

function expiry(expiresIn: string | undefined, expiresAt: string | undefined): Date {
  if (expiresIn && expiresAt) throw new UsageError("give --expires-in or --expires-at, not both");
  const match = expiresIn ? DURATION.exec(expiresIn) : null;
  if (expiresIn && !match) throw new UsageError("--expires-in must look like 30m, 24h or 7d");
  const at = match
    ? new Date(Date.now() + Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS])
    : expiresAt
      ? new Date(expiresAt)
      : undefined;
  if (!at) throw new UsageError("--expires-in or --expires-at (ISO 8601) is required");
  const flag = match ? "--expires-in" : "--expires-at";
  // A duration past what a date can hold (99999999999d) is an invalid date too, not a database error.
  if (Number.isNaN(at.getTime())) {
    throw new UsageError(match ? "--expires-in is too far ahead" : "--expires-at must be an ISO 8601 time");
  }
  // Refused here as grantException would, before the database (or the embedded cluster) is opened.
  if (at.getTime() <= Date.now()) throw new UsageError(`${flag} must be in the future`);
  return at;
}

function toWire(exception: FundingException): Record<string, unknown> {
  return {
    id: exception.id,
    wallet: exception.wallet,
    mode: "approved_non_zero",
    ceiling_units: exception.ceilingUnits.toString(),
    reason: exception.reason,
    approved_at: exception.approvedAt.toISOString(),
    expires_at: exception.expiresAt.toISOString(),
    revoked_at: exception.revokedAt?.toISOString() ?? null,
    active: exception.active,
  };
}

runCli({ name: "funding", usage: HELP, run });
