/**
 * Requests of the ops a schema alone cannot reach past their first check, in the shapes the origin
 * (or an origin an attacker holds) sends them: the world's own keys bound to their addresses,
 * payer signatures of real authorizations, operator approvals of the action they name, real
 * backup envelopes and restore packages changed a byte at a time, the recovery key sealed as the
 * loader seals it, P-256 keys and points at the curve's edges. Most cases are typical; a third put
 * one field at one of its edges. The socket fuzz (../fuzz.int.test.ts) mutates them further.
 * Operator approvals the enrolled operator really signed are remembered with what they approve, so
 * a success that needed one can be held to it (fuzz-bounds.ts).
 */
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import type { Address } from "viem";
import { signOperatorApproval } from "../../ops/lib/operator-key.ts";
import { type AgentPolicyDocument, agentPolicySchema } from "../../shared/agent-policy.ts";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { MAX_FAUCET_COOLDOWN_MS } from "../../shared/enclave-ops.ts";
import type { EnclaveOp } from "../../shared/enclave-protocol.ts";
import type { Hex } from "../../shared/hex.ts";
import {
  agentPolicySubject,
  heldApprovalSubject,
  nodeFreezeSubject,
  type OperatorApprovedOp,
  operatorApprovalToWire,
} from "../../shared/operator-approval.ts";
import { arbitraryFromSchema } from "../../testing/fuzz/zod-arbitrary.ts";
import { RECIPIENT } from "./agent-policy.ts";
import { type FuzzWorld, OPERATOR_KEY_IDS, PASSKEY_IDS, signedAuthorization } from "./fuzz-world.ts";
import { edgePoints } from "./p256-points.ts";

export const UINT256_MAX = (2n ** 256n - 1n).toString();
/** Decimal strings the wire accepts, at the edges of the integer types behind them. */
const EDGE_UINTS = fc.constantFrom("0", "1", "9007199254740993", "18446744073709551616", UINT256_MAX);
const nowSeconds = (): number => Math.floor(Date.now() / 1000);
/** A time `ahead` seconds from when the case is made (not from when its arbitrary was). */
const secondsFromNow = (ahead: number): fc.Arbitrary<number> =>
  fc.constant(ahead).map((by) => nowSeconds() + by);
const hex32 = fc
  .uint8Array({ minLength: 32, maxLength: 32 })
  .map((bytes): Hex => `0x${Buffer.from(bytes).toString("hex")}`);

/** A field's typical values, and those at its edges. */
type Field = { typical: fc.Arbitrary<unknown>; edge?: fc.Arbitrary<unknown> };
const field = (typical: fc.Arbitrary<unknown>, edge?: fc.Arbitrary<unknown>): Field => ({ typical, edge });

/** Records of typical fields, or (a third of them) with one field at one of its edges. */
function oneAtItsEdge(fields: Record<string, Field>): fc.Arbitrary<Record<string, unknown>> {
  const typical = fc.record(
    Object.fromEntries(Object.entries(fields).map(([name, { typical }]) => [name, typical])),
  ) as fc.Arbitrary<Record<string, unknown>>;
  const edged = Object.entries(fields).flatMap(([name, { edge }]) =>
    edge ? [fc.tuple(typical, edge).map(([record, value]) => ({ ...record, [name]: value }))] : [],
  );
  return edged.length === 0
    ? typical
    : fc.oneof({ weight: 2, arbitrary: typical }, { weight: 1, arbitrary: fc.oneof(...edged) });
}

/** Strings that look like addresses, in any case: all lower case, so the checksum rule passes. */
const ADDRESS_LIKE = /^0x[0-9a-fA-F]{40}$/;

/**
 * `value` with every address-like string in lower case: a schema's generated addresses are mixed
 * case and fail the EIP-55 checksum nearly always, so generated params would stop there.
 */
export function withValidAddresses(value: unknown): unknown {
  if (typeof value === "string") return ADDRESS_LIKE.test(value) ? value.toLowerCase() : value;
  if (!value || typeof value !== "object" || value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.map(withValidAddresses);
  const out: Record<string, unknown> = Object.create(null);
  for (const [key, inner] of Object.entries(value)) out[key] = withValidAddresses(inner);
  return out;
}

/** A subject no request of the fuzz has: what an approval of something else signs. */
const OTHER_SUBJECT: Hex = `0x${"5a".repeat(32)}`;

/** What an approval the enrolled operator signed approves. */
/** What a genuine approval approves: `policyBefore` a set_agent_policy's (the policy it replaces). */
export type Approved = { op: OperatorApprovedOp; subject: Hex; policyBefore?: Hex };

/** The shaped requests of one world, and the approvals its operator signed for them. */
export class FuzzShapes {
  /** Wire approvals the enrolled operator signed, with what each approves. */
  readonly genuine = new WeakMap<object, Approved>();
  private counter = 0;
  private lastGenuine: { wire: object; approved: Approved } | undefined;
  /**
   * The node's freeze epoch as the bounds (fuzz-bounds.ts) last saw it sealed: what the operator
   * signs an unfreeze over, or (held back) over the one before.
   */
  freezeEpoch = 0;

  constructor(private readonly world: FuzzWorld) {}

  /** The shaped requests of `op`, or undefined where its schema's own values are the fuzz. */
  of(op: EnclaveOp): fc.Arbitrary<unknown> | undefined {
    switch (op) {
      case "sign_transfer":
        return this.transfer();
      case "sign_faucet":
        return this.faucet();
      case "sign_filler":
        return this.filler();
      case "sign_x402_authorization":
        return this.x402Authorization();
      case "sign_settlement":
        return this.settlement();
      case "sign_x402_offer":
        return this.offer();
      case "sign_x402_receipt":
        return this.receipt();
      case "approve_held":
        return this.approveHeld();
      case "set_agent_policy":
        return this.setAgentPolicy();
      case "set_node_frozen":
        return this.setNodeFrozen();
      case "export_backup":
        return this.exportBackup();
      case "verify_backup":
        return this.verifyBackup();
      case "restore_backup":
        return this.restoreBackup();
      case "load_recovery_key":
        return this.loadRecoveryKey();
      case "enroll_operator_key":
        return this.enrollOperatorKey();
      case "enroll_operator_passkey":
        return this.enrollOperatorPasskey();
      case "revoke_operator_passkey":
        return this.revokeOperatorPasskey();
      case "revoke_operator_key":
        return this.revokeOperatorKey();
      case "configure_policy":
        return this.configurePolicy();
      case "configure_treasury":
        return this.configureTreasury();
      case "configure_settler":
        return this.configureRole("settler");
      case "configure_payee":
        return this.configureRole("payee");
      default:
        return undefined;
    }
  }

  /** A key's ref and the address the caller says it has: its own mostly, another key's at the edge. */
  private signer(
    usual: { key_ref: string; address: Address }[],
    others: { key_ref: string; address: Address }[],
  ): Field {
    const pair = (key: { key_ref: string; address: Address }) => ({
      key_ref: key.key_ref,
      from: key.address,
    });
    const { agents, treasury, settler, payee } = this.world;
    const everyKey = [...agents, treasury, settler, payee];
    return field(
      fc.constantFrom(...usual).map(pair),
      fc.oneof(
        fc.constantFrom(...others).map(pair),
        // A key bound to another key's address.
        fc
          .tuple(fc.constantFrom(...usual), fc.constantFrom(...everyKey))
          .map(([key, other]) => ({ key_ref: key.key_ref, from: other.address })),
      ),
    );
  }

  private fees(gasLimit: string, minGasLimit: string): Record<string, Field> {
    return {
      max_fee_per_gas: field(fc.constantFrom("1000000000", "1"), EDGE_UINTS),
      max_priority_fee_per_gas: field(fc.constantFrom("1000000000", "0"), EDGE_UINTS),
      gas_limit: field(fc.constant(gasLimit), fc.constantFrom(minGasLimit, "20999", "30000001", UINT256_MAX)),
    };
  }

  /** Few nonces, so transactions share them and fillers find the ones signed. */
  private static readonly nonce = field(
    fc.nat({ max: 63 }).map(String),
    fc.constantFrom("0", "4294967296", "9007199254740992", UINT256_MAX),
  );
  private static readonly chainId = field(fc.constant(CHAIN_ID), fc.constantFrom(1, 0, 2 ** 32));

  /** A record's `signer` field spread into key_ref and from. */
  private static spreadSigner = ({ signer, ...rest }: Record<string, unknown>) => ({
    ...(signer as object),
    ...rest,
  });

  private transfer(): fc.Arbitrary<unknown> {
    const { agents, treasury, settler, payee, policy } = this.world;
    return oneAtItsEdge({
      signer: this.signer(agents, [treasury, settler, payee]),
      chain_id: FuzzShapes.chainId,
      to: field(
        fc.constantFrom(RECIPIENT, payee.address, ...agents.map((agent) => agent.address)),
        fc.constantFrom(policy.operator_pool, NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase()),
      ),
      // Up to the per-transaction limit less a 21-unit fee, so a key's day fills within a run.
      value_units: field(
        fc.constantFrom("1", "1000", "4000000", "9999979"),
        fc.oneof(EDGE_UINTS, fc.constantFrom("9999980", "10000000", "99999999")),
      ),
      nonce: FuzzShapes.nonce,
      ...this.fees("21000", "21000"),
      action_id: field(fc.constant(undefined), fc.uuid()),
    })
      .map(FuzzShapes.spreadSigner)
      .map(({ action_id, ...rest }) => (action_id === undefined ? rest : { ...rest, action_id }));
  }

  private faucet(): fc.Arbitrary<unknown> {
    const { agents, treasury, settler, policy, faucet, spares } = this.world;
    const payout = faucet.payoutUnits;
    return oneAtItsEdge({
      signer: this.signer([treasury], [agents[0]!, settler, spares.faucet]),
      chain_id: FuzzShapes.chainId,
      to: field(
        fc.constantFrom(...agents.map((agent) => agent.address)),
        fc.constantFrom(RECIPIENT, treasury.address, policy.operator_pool),
      ),
      value_units: field(
        fc.constant(payout.toString()),
        fc.constantFrom("0", (payout - 1n).toString(), (payout + 1n).toString(), UINT256_MAX),
      ),
      nonce: FuzzShapes.nonce,
      ...this.fees("21000", "21000"),
    }).map(FuzzShapes.spreadSigner);
  }

  private filler(): fc.Arbitrary<unknown> {
    const { agents, treasury, settler, payee, spares } = this.world;
    return oneAtItsEdge({
      signer: this.signer([...agents, settler, treasury], [payee, spares.faucet, spares.settler]),
      chain_id: FuzzShapes.chainId,
      nonce: FuzzShapes.nonce,
      max_fee_per_gas: field(fc.constantFrom("1000000000", "1"), EDGE_UINTS),
      max_priority_fee_per_gas: field(fc.constant("1"), EDGE_UINTS),
    }).map(FuzzShapes.spreadSigner);
  }

  /** The sealed pair, a payment under the node's ceiling, or one past it. */
  private payment(): Field {
    const { policy, payee } = this.world;
    return field(
      fc.constantFrom(
        { to: payee.address.toLowerCase(), value: BigInt(policy.x402_amount_units as string) },
        { to: RECIPIENT, value: 5_000n },
        { to: RECIPIENT, value: BigInt(policy.x402_max_per_payment_units as string) },
      ),
      fc.constantFrom(
        { to: RECIPIENT, value: BigInt(policy.x402_max_per_payment_units as string) + 1n },
        { to: policy.operator_pool, value: 5_000n },
        { to: RECIPIENT, value: 2n ** 256n - 1n },
      ),
    );
  }

  /** Seconds ahead of now an authorization is valid until: within the sealed window, or past it. */
  private static readonly validFor = field(
    fc.integer({ min: 30, max: 170 }),
    fc.constantFrom(-10, 0, 3, 6, 181, 400, 86_400),
  );

  private x402Authorization(): fc.Arbitrary<unknown> {
    const { agents, treasury, settler, payee } = this.world;
    return oneAtItsEdge({
      signer: this.signer(agents, [treasury, settler, payee]),
      payment: this.payment(),
      valid_after: field(
        fc.constant("0"),
        fc.oneof(fc.constant(UINT256_MAX), secondsFromNow(60).map(String)),
      ),
      valid_for: FuzzShapes.validFor,
      nonce: field(hex32),
    }).map(({ signer, payment, valid_for, ...rest }) => {
      const { to, value } = payment as { to: string; value: bigint };
      return {
        ...(signer as object),
        to,
        value_units: value.toString(),
        valid_before: String(nowSeconds() + (valid_for as number)),
        ...rest,
      };
    });
  }

  private settlement(): fc.Arbitrary<unknown> {
    const { agents, settler, payee, payer, stranger, policy, spares } = this.world;
    const authorization = oneAtItsEdge({
      payment: this.payment(),
      // Who signs in the payer's name: the payer, a stranger, or the payer with `from` the pool.
      by: field(fc.constant("payer"), fc.constantFrom("stranger", "pool", "tampered", "high-s", "parity")),
      valid_after: field(fc.constant(0), fc.oneof(secondsFromNow(-3), secondsFromNow(60))),
      valid_for: FuzzShapes.validFor,
      nonce: field(hex32),
    }).map(({ payment, by, valid_after, valid_for, nonce }) => {
      const { to, value } = payment as { to: string; value: bigint };
      const fields = {
        from: by === "pool" ? (policy.operator_pool as Address) : payer.address,
        to,
        value,
        validAfter: BigInt(valid_after as number),
        validBefore: BigInt(nowSeconds() + (valid_for as number)),
        nonce: nonce as Hex,
      };
      const signed = signedAuthorization(by === "stranger" || by === "pool" ? stranger : payer, fields);
      return signedVariant(signed, by as string);
    });
    return oneAtItsEdge({
      signer: field(
        fc.constant({ key_ref: settler.key_ref }),
        fc.constantFrom(...[agents[0]!, payee, spares.settler].map((key) => ({ key_ref: key.key_ref }))),
      ),
      chain_id: FuzzShapes.chainId,
      signed: field(authorization),
      nonce: FuzzShapes.nonce,
      ...this.fees("100000", "21000"),
    }).map(({ signer, signed, ...rest }) => ({ ...(signer as object), ...(signed as object), ...rest }));
  }

  private offer(): fc.Arbitrary<unknown> {
    const { payee, settler, agents, policy, spares } = this.world;
    const amount = policy.x402_amount_units as string;
    return oneAtItsEdge({
      payee_address: field(
        fc.constant(payee.address.toLowerCase()),
        fc.constantFrom(settler.address, agents[0]!.address, spares.payee.address),
      ),
      resource_url: FuzzShapes.resourceUrl,
      scheme: field(fc.constant("exact"), fc.constantFrom("upto", "EXACT", "exact ")),
      network: field(fc.constant(`eip155:${CHAIN_ID}`), fc.constantFrom("eip155:1", "eip155:077", "base")),
      asset: field(
        fc.constant(NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase()),
        fc.constantFrom(RECIPIENT, payee.address),
      ),
      pay_to: field(fc.constant(payee.address.toLowerCase()), fc.constantFrom(RECIPIENT, settler.address)),
      amount: field(fc.constant(amount), fc.constantFrom("0", (BigInt(amount) + 1n).toString(), UINT256_MAX)),
      valid_for_seconds: field(
        fc.integer({ min: 1, max: policy.x402_max_timeout_seconds as number }),
        fc.constantFrom((policy.x402_max_timeout_seconds as number) + 1, 86_400),
      ),
    });
  }

  private static readonly resourceUrl = field(
    fc.constant("https://pay.example.test/77/x402/demo"),
    fc.oneof(fc.string({ minLength: 1, maxLength: 64, unit: "binary" }), fc.constant("x".repeat(2048))),
  );

  private receipt(): fc.Arbitrary<unknown> {
    const { payee, settler, payer, stranger, settlements } = this.world;
    return oneAtItsEdge({
      payee_address: field(fc.constant(payee.address.toLowerCase()), fc.constant(settler.address)),
      resource_url: FuzzShapes.resourceUrl,
      network: field(fc.constant(`eip155:${CHAIN_ID}`), fc.constantFrom("eip155:1", "base")),
      payer: field(fc.constant(payer.address), fc.constantFrom(stranger.address, payee.address)),
      transaction: field(fc.constantFrom(...settlements.map((settlement) => settlement.txHash)), hex32),
    });
  }

  /**
   * An approval of `op` over `subject` by the enrolled operator, or one of the ways one can be
   * wrong: an impostor's key under the operator's id, an unknown id, an approval of another
   * subject, an expired or too long one, another instance's, or an earlier approval sent again.
   */
  private approval(op: OperatorApprovedOp, subject: () => Hex, policyBefore?: Hex): fc.Arbitrary<unknown> {
    const { world } = this;
    return fc
      .constantFrom(
        "genuine",
        "genuine",
        "genuine",
        "impostor",
        "unknown-id",
        "other-subject",
        "expired",
        "too-long",
        "other-instance",
        "again",
      )
      .map((how) => {
        if (how === "again" && this.lastGenuine) {
          // A copy of an approval the operator did sign: accepted, it must not be accepted twice.
          const again = { ...this.lastGenuine.wire };
          this.genuine.set(again, this.lastGenuine.approved);
          return again;
        }
        const now = nowSeconds();
        const approved: Approved = {
          op,
          subject: how === "other-subject" ? OTHER_SUBJECT : subject(),
          ...(policyBefore === undefined ? {} : { policyBefore }),
        };
        const wire = operatorApprovalToWire(
          signOperatorApproval(how === "impostor" ? world.impostor : world.operator.key, {
            envId: world.envId,
            chainId: CHAIN_ID,
            instanceId: how === "other-instance" ? randomUUID() : world.instanceId,
            op,
            subject: approved.subject,
            ...(policyBefore === undefined ? {} : { policyBefore }),
            keyId: how === "unknown-id" ? "nobody" : world.operator.keyId,
            counter: ++this.counter,
            expiresAt: how === "expired" ? now - 1 : how === "too-long" ? now + 7200 : now + 300,
          }),
        );
        if (how === "genuine" || how === "again") {
          this.genuine.set(wire, approved);
          this.lastGenuine = { wire, approved };
        }
        return wire;
      });
  }

  private approveHeld(): fc.Arbitrary<unknown> {
    const { agents, treasury, instanceId } = this.world;
    const action = oneAtItsEdge({
      key_ref: field(fc.constantFrom(...agents.map((agent) => agent.key_ref)), fc.constant(treasury.key_ref)),
      held: field(
        fc.oneof(
          fc.uuid({ version: 4 }).map((ref) => ({ kind: "transfer", ref })),
          hex32.map((ref) => ({ kind: "x402", ref })),
        ),
        fc.oneof(
          hex32.map((ref) => ({ kind: "transfer", ref })),
          fc.uuid().map((ref) => ({ kind: "x402", ref })),
        ),
      ),
      to: field(fc.constant(RECIPIENT)),
      value_units: field(fc.constantFrom("1", "50000"), EDGE_UINTS),
      expires_in: field(fc.constant(3600), fc.constantFrom(-1, 0, 7 * 86_400 + 60)),
    });
    return action.chain(({ held, expires_in, ...rest }) => {
      const { kind, ref } = held as { kind: "transfer" | "x402"; ref: string };
      const expiresAt = nowSeconds() + (expires_in as number);
      const params: Record<string, unknown> = { ...rest, kind, ref, expires_at: expiresAt };
      const subject = () =>
        heldApprovalSubject(
          {
            instanceId,
            keyRef: params.key_ref as string,
            kind,
            ref,
            to: params.to as string,
            valueUnits: BigInt(params.value_units as string),
          },
          expiresAt,
        );
      return this.approval("approve_held", subject).map((operator) => ({ ...params, operator }));
    });
  }

  private setAgentPolicy(): fc.Arbitrary<unknown> {
    const { agents, payee } = this.world;
    const typical: (AgentPolicyDocument | null)[] = [
      null,
      { transfers: { daily_units: "1000" } },
      { transfers: { per_tx_units: "1000000000", allow: [RECIPIENT] } },
      { x402: { payees: [{ pay_to: payee.address.toLowerCase(), per_payment_units: "10000" }] } },
      { approval_above_units: "1" },
      { frozen: true },
    ];
    const document = fc.oneof(
      fc.constantFrom(...typical),
      arbitraryFromSchema(agentPolicySchema).map(withValidAddresses),
    );
    return fc
      .record({
        key_ref: fc.constantFrom(...agents.map((agent) => agent.key_ref)),
        policy: document,
        // The policy the operator signs over: the one the key holds when it is one of the typical.
        before: fc.constantFrom(...typical),
      })
      .chain(({ before, ...params }) =>
        fc.oneof(
          fc.constant(params),
          this.approval(
            "set_agent_policy",
            () => agentPolicySubject(params.key_ref, params.policy as AgentPolicyDocument | null),
            agentPolicySubject(params.key_ref, before),
          ).map((operator) => ({ ...params, operator })),
        ),
      );
  }

  private setNodeFrozen(): fc.Arbitrary<unknown> {
    // Read when a case is drawn: the freeze holding now, or an approval held back from one before.
    const epoch = fc
      .constantFrom("now", "now", "now", "earlier")
      .map((when) => (when === "now" ? this.freezeEpoch : Math.max(0, this.freezeEpoch - 1)));
    return fc.tuple(fc.boolean(), epoch).chain(([frozen, freezeEpoch]) =>
      fc.oneof(
        fc.constant({ frozen }),
        this.approval("set_node_frozen", () => nodeFreezeSubject(frozen, freezeEpoch)).map((operator) => ({
          frozen,
          freeze_epoch: freezeEpoch,
          operator,
        })),
      ),
    );
  }

  /** The world's batch as backed up, or asked for with a key too few, too many or twice, or under another id. */
  private exportBackup(): fc.Arbitrary<unknown> {
    const { backup, donor, agents } = this.world;
    const refs = backup.keys.map((key) => key.key_ref);
    return oneAtItsEdge({
      batch_id: field(
        fc.constant(backup.batch_id),
        fc.constantFrom(donor.batch_id, backup.batch_id.toUpperCase()),
      ),
      key_refs: field(
        fc.constantFrom(refs, [...refs].reverse()),
        fc.constantFrom(
          refs.slice(1),
          [...refs, agents[0]!.key_ref],
          [refs[0]!, ...refs],
          [agents[0]!.key_ref],
        ),
      ),
    });
  }

  /** The world's envelope, or that envelope with a byte changed, cut short or grown. */
  private verifyBackup(): fc.Arbitrary<unknown> {
    return altered(this.world.backup.envelope).map((bytes) => ({ envelope: bytes }));
  }

  /**
   * A backup envelope of this enclave's or of the donor's, or a restore package of the session, each
   * as made or altered: what a drill or a recovery gives restore_backup, and what a thief of the
   * backup folder could make of it.
   */
  private restoreBackup(): fc.Arbitrary<unknown> {
    const { backup, donor, recovery } = this.world;
    return fc.oneof(
      fc
        .constantFrom(backup.envelope, donor.envelope)
        .chain(altered)
        .map((bytes) => ({ envelope: bytes })),
      fc
        .constantFrom(...recovery.packages)
        .chain(altered)
        .map((bytes) => ({ package: bytes })),
    );
  }

  /** The session's boxes, genuine or not, or one of them with a byte of its ciphertext changed. */
  private loadRecoveryKey(): fc.Arbitrary<unknown> {
    const boxes = this.world.recovery.keyBoxes.map((box) => box.params);
    const changed = fc
      .tuple(fc.constantFrom(...boxes), fc.nat(), fc.integer({ min: 1, max: 255 }))
      .map(([box, at, flip]) => {
        const ct = Buffer.from(box.ct.slice(2), "hex");
        ct[at % ct.length]! ^= flip;
        return { ...box, ct: `0x${ct.toString("hex")}` };
      });
    return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...boxes) }, changed);
  }

  /**
   * Key ids of one kind (`prefix`): mostly taken already, a few free (fuzz-world.ts sets the
   * numbers, so that the operator keys leave room and the passkeys use it up), now and then one of
   * `others` (the operator's, the other kind's); at the edge, one the schema refuses.
   */
  private static keyIds(prefix: string, count: number, others: string[]): Field {
    return field(
      fc.oneof(
        {
          weight: 4,
          arbitrary: fc.constantFrom(...Array.from({ length: count }, (_, index) => `${prefix}${index}`)),
        },
        { weight: 1, arbitrary: fc.constantFrom(...others) },
      ),
      fc.constantFrom("x".repeat(64), "x".repeat(65), "fuzz op", ""),
    );
  }

  /**
   * The world's policy, or with one term at an edge: limits at the integer types' ends, an
   * allowlist, the x402 pair half set, dropped or paying the spare payee, the pool an agent's
   * address, the window's and the margin's bounds, the ceiling absent, zero or listing payees.
   */
  private configurePolicy(): fc.Arbitrary<unknown> {
    const { policy, agents, spares } = this.world;
    const term = (name: string, edge: fc.Arbitrary<unknown>): Field => field(fc.constant(policy[name]), edge);
    return oneAtItsEdge({
      per_tx_limit_units: term("per_tx_limit_units", EDGE_UINTS),
      daily_limit_units: term("daily_limit_units", EDGE_UINTS),
      recipient_allowlist: term(
        "recipient_allowlist",
        fc.constantFrom([], [RECIPIENT], [RECIPIENT, RECIPIENT, agents[0]!.address.toLowerCase()]),
      ),
      pair: field(
        fc.constant({ x402_amount_units: policy.x402_amount_units, x402_pay_to: policy.x402_pay_to }),
        fc.constantFrom(
          { x402_amount_units: null, x402_pay_to: null },
          { x402_amount_units: null, x402_pay_to: policy.x402_pay_to },
          { x402_amount_units: policy.x402_amount_units, x402_pay_to: null },
          { x402_amount_units: "0", x402_pay_to: spares.payee.address.toLowerCase() },
        ),
      ),
      x402_max_timeout_seconds: term("x402_max_timeout_seconds", fc.constantFrom(1, 86_400, 0, 86_401)),
      operator_pool: term("operator_pool", fc.constantFrom(agents[0]!.address.toLowerCase(), RECIPIENT)),
      fee_ceiling_wei: term("fee_ceiling_wei", EDGE_UINTS),
      x402_validity_margin_seconds: term("x402_validity_margin_seconds", fc.constantFrom(0, 600, 601)),
      x402_daily_limit: term("x402_daily_limit", fc.constantFrom(0, Number.MAX_SAFE_INTEGER, -1)),
      settler_daily_fee_units: term("settler_daily_fee_units", EDGE_UINTS),
      ceiling: field(
        fc.constant({
          x402_max_per_payment_units: policy.x402_max_per_payment_units,
          x402_payees: policy.x402_payees,
        }),
        fc.constantFrom(
          {},
          { x402_max_per_payment_units: null, x402_payees: null },
          { x402_max_per_payment_units: "0" },
          { x402_max_per_payment_units: UINT256_MAX, x402_payees: [RECIPIENT, RECIPIENT] },
          { x402_max_per_payment_units: "5000", x402_payees: [] },
        ),
      ),
    }).map(({ pair, ceiling, ...terms }) => ({ ...terms, ...(pair as object), ...(ceiling as object) }));
  }

  /**
   * The world's treasury terms, on the faucet key it names, on the spare faucet key or on none (the
   * one named is kept); at the edge, on a key of another namespace or one the enclave never held,
   * or a term at its type's end.
   */
  private configureTreasury(): fc.Arbitrary<unknown> {
    const { treasury, faucet, agents, settler, payee, spares } = this.world;
    return oneAtItsEdge({
      faucet_key_ref: field(
        fc.constantFrom(undefined, null, treasury.key_ref, spares.faucet.key_ref),
        fc.constantFrom(
          agents[0]!.key_ref,
          settler.key_ref,
          payee.key_ref,
          spares.settler.key_ref,
          "ab".repeat(32),
        ),
      ),
      budget_units: field(fc.constant(faucet.budgetUnits.toString()), EDGE_UINTS),
      payout_units: field(fc.constant(faucet.payoutUnits.toString()), EDGE_UINTS),
      cooldown_ms: field(
        fc.constant(faucet.cooldownMs),
        fc.constantFrom(0, 1, MAX_FAUCET_COOLDOWN_MS, MAX_FAUCET_COOLDOWN_MS + 1),
      ),
      daily_limit_units: field(fc.constant(faucet.dailyUnits.toString()), EDGE_UINTS),
    }).map(FuzzShapes.defined);
  }

  /**
   * The key `role` is pointed at: none (the one named is kept), the one it names, or the spare of its
   * namespace; at the edge, a key of another namespace (another role's, an agent's) or one never held.
   */
  private configureRole(role: "settler" | "payee"): fc.Arbitrary<unknown> {
    const { agents, treasury, settler, payee, spares } = this.world;
    const named = role === "settler" ? settler : payee;
    const others = [agents[0]!, treasury, role === "settler" ? payee : settler, spares.faucet];
    return oneAtItsEdge({
      [`${role}_key_ref`]: field(
        fc.constantFrom(undefined, named.key_ref, spares[role].key_ref),
        fc.constantFrom(...others.map((key) => key.key_ref), "ab".repeat(32)),
      ),
    }).map(FuzzShapes.defined);
  }

  /** The world's P-256 keys, or a point at an edge of the curve (on it, or not a key at all). */
  private operatorPublicKey(): Field {
    const keys = this.world.operatorPublicKeys;
    const { onCurve, offCurve } = edgePoints(keys[keys.length - 1]!);
    return field(fc.constantFrom(...keys), fc.constantFrom(...onCurve, ...offCurve));
  }

  private static readonly label = field(
    fc.constantFrom(undefined, "laptop"),
    fc.constantFrom("x".repeat(128), "x".repeat(129)),
  );

  /** The record without the fields left undefined (no key present without a value on the wire). */
  private static defined = (record: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));

  private enrollOperatorKey(): fc.Arbitrary<unknown> {
    return oneAtItsEdge({
      key_id: FuzzShapes.keyIds(OPERATOR_KEY_IDS.prefix, OPERATOR_KEY_IDS.count, [
        "fuzz-operator",
        "fuzz-pk-0",
      ]),
      public_key: this.operatorPublicKey(),
      label: FuzzShapes.label,
    }).map(FuzzShapes.defined);
  }

  /** An operator key's id: the ids enrolled meet now and then, a passkey's at the edge. */
  private revokeOperatorKey(): fc.Arbitrary<unknown> {
    return oneAtItsEdge({
      key_id: FuzzShapes.keyIds(OPERATOR_KEY_IDS.prefix, OPERATOR_KEY_IDS.count, [
        "fuzz-operator",
        "fuzz-pk-0",
      ]),
    }).map(FuzzShapes.defined);
  }

  /** Credential ids, few so that one meets another key id; at the edge, at and past their bounds. */
  private static readonly credentialIds = field(
    fc.constantFrom(
      ...Array.from({ length: PASSKEY_IDS.credentials }, (_, index) => `fuzz-credential-${index}-AAAA`),
    ),
    fc.constantFrom("A".repeat(16), "A".repeat(15), "A".repeat(1364), "A".repeat(1365), "fuzz+credential/0="),
  );

  private enrollOperatorPasskey(): fc.Arbitrary<unknown> {
    return oneAtItsEdge({
      key_id: FuzzShapes.keyIds(PASSKEY_IDS.prefix, PASSKEY_IDS.count, [
        "fuzz-operator",
        "fuzz-op-0",
        "fuzz-op-1",
      ]),
      operator: field(
        fc.constantFrom("alice", "bob"),
        fc.constantFrom("x".repeat(64), "x".repeat(65), "ali\u0000ce", "ali\u007fce", " "),
      ),
      credential_id: FuzzShapes.credentialIds,
      public_key: this.operatorPublicKey(),
      rp_id: field(
        fc.constantFrom("localhost", "console.example.test"),
        fc.constantFrom("x".repeat(254), ""),
      ),
      origin: field(
        fc.constantFrom("http://localhost:8787", "https://console.example.test"),
        fc.constantFrom("x".repeat(257), ""),
      ),
      label: FuzzShapes.label,
    }).map(FuzzShapes.defined);
  }

  /** A passkey's id and credential: the pairs enrolled meet now and then, the others mismatch. */
  private revokeOperatorPasskey(): fc.Arbitrary<unknown> {
    return oneAtItsEdge({
      key_id: FuzzShapes.keyIds(PASSKEY_IDS.prefix, PASSKEY_IDS.count, ["fuzz-operator", "fuzz-op-0"]),
      credential_id: FuzzShapes.credentialIds,
    }).map(FuzzShapes.defined);
  }
}

/** `bytes` as they are, or with a byte changed, cut short or grown. */
function altered(bytes: Uint8Array): fc.Arbitrary<Uint8Array> {
  const changed = fc
    .tuple(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 1, max: 255 }))
    .map(([at, flip]) => bytes.map((byte, index) => (index === at ? byte ^ flip : byte)));
  const cut = fc.nat({ max: bytes.length - 1 }).map((length) => bytes.slice(0, length));
  const grown = fc
    .uint8Array({ minLength: 1, maxLength: 64 })
    .map((extra) => Uint8Array.from([...bytes, ...extra]));
  return fc.oneof({ weight: 1, arbitrary: fc.constant(bytes) }, changed, cut, grown);
}

/**
 * A payer's signed authorization as sign_settlement carries it, made wrong in the way `by` names
 * after signing: a field changed, S in the upper half of the order, v as the parity bit.
 */
function signedVariant(
  signed: { authorization: Record<string, string>; signature: Hex },
  by: string,
): { authorization: Record<string, string>; signature: Hex } {
  const { authorization, signature } = signed;
  switch (by) {
    case "tampered":
      return { authorization: { ...authorization, value: `${authorization.value}0` }, signature };
    case "high-s": {
      const order = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
      const s = order - BigInt(`0x${signature.slice(66, 130)}`);
      const v = signature.slice(130) === "1b" ? "1c" : "1b";
      return {
        authorization,
        signature: `${signature.slice(0, 66)}${s.toString(16).padStart(64, "0")}${v}` as Hex,
      };
    }
    case "parity":
      return {
        authorization,
        signature: `${signature.slice(0, 130)}${signature.slice(130) === "1b" ? "00" : "01"}` as Hex,
      };
    default:
      return signed;
  }
}
