/**
 * `npm run policy -- show|set|approve|reject|freeze|unfreeze|enroll|reseal`: the operator's tool for the
 * agents' spending policies (docs/operations.md#agent-spending-policies-npm-run-policy). Uses the
 * node's configuration as `npm run agents` does (the database, the enclave's endpoint, the admin
 * authority key the origin holds). Every change goes through origin/policy/change.ts, as the
 * agent's PATCH does: checked, sealed in the enclave with the admin capability, then stored with
 * its audit row. What loosens (a looser policy, an unfreeze) or approves a held action carries an
 * approval signed with an enrolled operator key (docs/enclave.md#agent-policies-operator-keys-and-approvals),
 * which the enclave verifies itself; the key file's contents are never printed.
 * Exit codes: docs/operations.md#exit-codes-of-the-operator-tools.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { Db } from "../origin/db/client.ts";
import { openDatabase } from "../origin/db/open.ts";
import {
  changeAgentPolicy,
  changeNodeFrozen,
  type PolicyChangeDeps,
  type PolicyChangeError,
} from "../origin/policy/change.ts";
import type { ChangedBy } from "../origin/policy/store.ts";
import { readPolicyState, storedAgentPolicies } from "../origin/policy/store.ts";
import { policyView } from "../origin/policy/view.ts";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import type { GetPolicyResult, SealedIdentity, SignerClient, SignerFailure } from "../origin/signer/types.ts";
import {
  type AgentPolicyDocument,
  agentPolicySchema,
  loosenings,
  NO_AGENT_POLICY,
  type NodePayee,
  policyFromDocument,
  samePolicyDocument,
} from "../shared/agent-policy.ts";
import { MAX_HELD_APPROVAL_SECONDS } from "../shared/enclave-ops.ts";
import { errorMessage } from "../shared/error-message.ts";
import {
  agentPolicySubject,
  heldApprovalSubject,
  type KeyApproval,
  nodeFreezeSubject,
} from "../shared/operator-approval.ts";
import { readAdminKey } from "./lib/admin-key.ts";
import {
  type CliContext,
  type CliOutcome,
  DONE,
  errored,
  readArgumentFile,
  refused,
  runCli,
  UsageError,
} from "./lib/cli-shell.ts";
import { enclaveUnreachable, operatorSignerClient } from "./lib/enclave-unreachable.ts";
import { nodeConfig } from "./lib/node-config.ts";
import { type OperatorKey, readOperatorKey } from "./lib/operator-key.ts";
import { enclaveSocketPath } from "./lib/policy-cli-args.ts";
import {
  actionOf,
  agentKeyRef,
  approveHeldAction,
  decideHeld,
  heldActionsOf,
  heldSubjectOf,
  storedNodeFrozen,
} from "./lib/policy-holds.ts";
import { enrollOperator, minterFor, type OperatorSigner, operatorSigner } from "./lib/policy-operator.ts";
import { formatPolicyShow, policyShowJson } from "./lib/policy-show.ts";
import { POLICY_TOOL_USAGE, type PolicyToolCommand, parsePolicyToolArgs } from "./lib/policy-tool-args.ts";

type Command<Name extends PolicyToolCommand["command"]> = Extract<PolicyToolCommand, { command: Name }>;

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  const command = parsePolicyToolArgs(argv);
  const config = nodeConfig(env);
  const socketPath = enclaveSocketPath(command.socket, config.signer.endpoint);
  if (command.command === "enroll") return withClient(socketPath, (client) => enroll(command, client));

  // Every file is read before anything is asked: a file that cannot be read changes nothing.
  const operatorKey =
    "operatorKeyFile" in command && command.operatorKeyFile !== undefined
      ? await readArgumentFile(
          "--operator-key",
          command.operatorKeyFile,
          "a P-256 private key (PKCS#8 PEM)",
          readOperatorKey,
        )
      : undefined;
  const document = command.command === "set" ? await readPolicyFile(command.file) : undefined;
  const needsAdmin = command.command !== "show" && command.command !== "reject";
  const adminSecret = needsAdmin ? await readAdminKey(config) : undefined;

  const database = await openDatabase(config, 2);
  try {
    const { db } = database;
    if (command.command === "reject") return await reject(db, command);
    return await withClient(socketPath, async (client) => {
      if (command.command === "show") return show(db, client, command);
      const identity = await client.getSealedIdentity();
      if (!identity.ok) return signerOutcome(identity.error);
      const sealed = await client.getPolicy();
      if (!sealed.ok) return signerOutcome(sealed.error);
      let signer: OperatorSigner | undefined;
      if (operatorKey) {
        const found = await signerOf(client, identity.value, operatorKey, command);
        if ("exit" in found) return found;
        signer = found;
      }
      const tool: Tool = {
        db,
        client,
        identity: identity.value,
        sealed: sealed.value,
        json: command.json,
        signer,
        deps: {
          db,
          signer: client,
          authorize: minterFor(client, identity.value, adminSecret!, "policy"),
          nodePayee:
            sealed.value.policy?.x402AmountUnits != null && sealed.value.policy.x402PayTo
              ? { payTo: sealed.value.policy.x402PayTo, amountUnits: sealed.value.policy.x402AmountUnits }
              : null,
        },
      };
      switch (command.command) {
        case "set":
          return set(tool, command.agentId, document as AgentPolicyDocument | null);
        case "approve":
          return approve(tool, command);
        case "reseal":
          return reseal(tool);
        case "freeze":
        case "unfreeze":
          return "all" in command.target
            ? freezeNode(tool, command.command === "freeze")
            : freezeAgent(tool, command.target.agentId, command.command === "freeze");
      }
    });
  } finally {
    await database.close();
  }
}

/** What a change command works with, once the enclave and the database answered. */
type Tool = {
  db: Db;
  client: SignerClient;
  identity: SealedIdentity;
  sealed: GetPolicyResult;
  json: boolean;
  /** The operator key's signer, when --operator-key was given. */
  signer: OperatorSigner | undefined;
  deps: PolicyChangeDeps;
};

async function show(db: Db, client: SignerClient, command: Command<"show">): Promise<CliOutcome> {
  const keyRef = await agentKeyRef(db, command.agentId);
  if (keyRef === null) return refused(`no agent ${command.agentId}`);
  const now = new Date();
  const view = policyView(await readPolicyState(db, command.agentId, now), now);
  const held = await heldActionsOf(db, command.agentId);
  const enclave = await client.getAgentPolicy({ keyRef });
  if (!enclave.ok) return signerOutcome(enclave.error);
  const shown = policyShowJson(command.agentId, view, held, enclave.value);
  write(command.json ? `${JSON.stringify(shown, null, 2)}\n` : formatPolicyShow(shown));
  return DONE;
}

async function set(tool: Tool, agentId: string, next: AgentPolicyDocument | null): Promise<CliOutcome> {
  const keyRef = await agentKeyRef(tool.db, agentId);
  if (keyRef === null) return refused(`no agent ${agentId}`);
  let operator: KeyApproval | undefined;
  if (tool.signer) {
    const enclave = await tool.client.getAgentPolicy({ keyRef });
    if (!enclave.ok) return signerOutcome(enclave.error);
    operator = approvePolicy(tool.signer, keyRef, enclave.value.policy, next);
  }
  return changed(
    tool,
    agentId,
    await changeAgentPolicy(tool.deps, {
      agent: { agentId, keyRef },
      next,
      changedBy: changedBy(tool),
      ...(operator ? { operator } : {}),
    }),
  );
}

/**
 * freeze: the agent's policy with `frozen` (a tightening: the admin capability alone). unfreeze:
 * without it, under an operator's approval of that exact policy; an agent that had no policy
 * before its freeze is left with none.
 */
async function freezeAgent(tool: Tool, agentId: string, frozen: boolean): Promise<CliOutcome> {
  const keyRef = await agentKeyRef(tool.db, agentId);
  if (keyRef === null) return refused(`no agent ${agentId}`);
  const state = await readPolicyState(tool.db, agentId, new Date());
  const enclave = await tool.client.getAgentPolicy({ keyRef });
  if (!enclave.ok) return signerOutcome(enclave.error);
  const stored = state.stored?.document ?? null;
  // A freeze builds on the enclave's policy where it holds a tighter one than the database (a
  // change sealed whose row was lost): built on the stored one, it would loosen the enclave's,
  // which refuses it, and the agent could not be frozen alone.
  const current =
    (frozen && enclaveHoldsTighter(enclave.value.policy, stored, tool.deps.nodePayee)
      ? enclave.value.policy
      : stored) ?? {};
  // Nothing to do only when the database and the enclave agree that it is done.
  if ((current.frozen ?? false) === frozen && (enclave.value.policy?.frozen ?? false) === frozen) {
    return said(
      tool,
      { agent_id: agentId, frozen, changed: false },
      `agent ${agentId} is already ${frozen ? "frozen" : "not frozen"}`,
    );
  }
  const { frozen: _, ...rest } = current;
  const next: AgentPolicyDocument | null = frozen
    ? { ...rest, frozen: true }
    : Object.keys(rest).length > 0
      ? rest
      : null;
  const operator =
    frozen || !tool.signer ? undefined : approvePolicy(tool.signer, keyRef, enclave.value.policy, next);
  const result = await changeAgentPolicy(tool.deps, {
    agent: { agentId, keyRef },
    next,
    changedBy: operator ? changedBy(tool) : { by: "admin" },
    ...(operator ? { operator } : {}),
  });
  return changed(tool, agentId, result, frozen ? "frozen" : "unfrozen");
}

/**
 * The operator's approval of the key's policy becoming `next`, over `sealed`, the policy the enclave
 * holds now: the enclave takes it over that policy only, so a change made meanwhile (the agent
 * froze or tightened its policy) refuses it (operator_policy_changed) rather than being undone.
 */
function approvePolicy(
  signer: OperatorSigner,
  keyRef: string,
  sealed: AgentPolicyDocument | null,
  next: AgentPolicyDocument | null,
): KeyApproval {
  return signer.approve(
    "set_agent_policy",
    agentPolicySubject(keyRef, next),
    agentPolicySubject(keyRef, sealed),
  );
}

/** The enclave holds another policy than the stored one, and one that allows nothing more. */
function enclaveHoldsTighter(
  sealed: AgentPolicyDocument | null,
  stored: AgentPolicyDocument | null,
  nodePayee: NodePayee | null,
): boolean {
  if (sealed === null || samePolicyDocument(sealed, stored)) return false;
  const of = (document: AgentPolicyDocument | null) =>
    document === null ? NO_AGENT_POLICY : policyFromDocument(document);
  return loosenings(of(stored), of(sealed), nodePayee).length === 0;
}

async function freezeNode(tool: Tool, frozen: boolean): Promise<CliOutcome> {
  if ((await storedNodeFrozen(tool.db)) === frozen && tool.sealed.nodeFrozen === frozen) {
    return said(
      tool,
      { node_frozen: frozen, changed: false },
      `the node is already ${frozen ? "frozen" : "not frozen"}`,
    );
  }
  // Over the freeze the enclave holds now (read at the start): lifting that one, no later one.
  const freezeEpoch = tool.sealed.nodeFreezeEpoch;
  const operator = frozen
    ? undefined
    : tool.signer?.approve("set_node_frozen", nodeFreezeSubject(false, freezeEpoch));
  const result = await changeNodeFrozen(tool.deps, {
    frozen,
    changedBy: operator ? changedBy(tool) : { by: "admin" },
    ...(operator ? { operator: { approval: operator, freezeEpoch } } : {}),
  });
  if (!result.ok) return changeRefusal(result.error);
  return said(
    tool,
    {
      node_frozen: frozen,
      changed: true,
      changed_by: operator ? "operator" : "admin",
      operator_key_id: operator?.keyId ?? null,
    },
    frozen
      ? "the node is frozen: every agent's transfers and x402 authorizations are refused (rule node.frozen)"
      : `the node is unfrozen (approved by operator key ${operator?.keyId})`,
  );
}

/**
 * Seals again every agent policy the database stores, and the node's freeze, where the enclave
 * does not hold them as stored. A recovered enclave holds the keys alone: without this, the limits
 * the policies set against a compromised origin are gone from the one place that enforces them
 * whatever the origin says, while the gateway still shows them. From no policy to the stored one
 * is a tightening (the admin capability alone); where the enclave holds another policy, it judges
 * the change against its own, and refuses a loosening (that agent is refused, the others go on).
 * A policy already held as stored is left as it is, so running it again changes nothing.
 */
async function reseal(tool: Tool): Promise<CliOutcome> {
  const resealed: { agent_id: string; version: number }[] = [];
  const refusedAgents: { agent_id: string; reason: string }[] = [];
  let held = 0;
  for (const { agentId, keyRef, stored } of await storedAgentPolicies(tool.db)) {
    const enclave = await tool.client.getAgentPolicy({ keyRef });
    if (enclave.ok && samePolicyDocument(enclave.value.policy, stored.document)) {
      held += 1;
      continue;
    }
    let outcome: CliOutcome;
    if (!enclave.ok) outcome = signerOutcome(enclave.error);
    else {
      const result = await changeAgentPolicy(tool.deps, {
        agent: { agentId, keyRef },
        // What is stored when the change holds the agent's lock, not what was read above.
        next: (current) => current,
        changedBy: { by: "admin" },
      });
      if (result.ok) {
        resealed.push({ agent_id: agentId, version: result.value.version });
        if (!tool.json) write(`agent ${agentId}'s policy sealed again, version ${result.value.version}\n`);
        continue;
      }
      outcome = changeRefusal(result.error);
    }
    // No answer from the enclave: the rest would get none either.
    if (outcome.exit !== "refused") return outcome;
    refusedAgents.push({ agent_id: agentId, reason: outcome.message ?? "" });
    if (!tool.json) write(`agent ${agentId}'s policy not sealed: ${outcome.message}\n`);
  }
  // The freeze only: an enclave frozen where the database is not was frozen by a change not stored,
  // and unfreezing it is an operator's (npm run policy -- unfreeze --all).
  let nodeFrozen: "held" | "sealed" | "not frozen" = "not frozen";
  if (await storedNodeFrozen(tool.db)) {
    nodeFrozen = "held";
    if (!tool.sealed.nodeFrozen) {
      const frozen = await changeNodeFrozen(tool.deps, { frozen: true, changedBy: { by: "admin" } });
      if (!frozen.ok) return changeRefusal(frozen.error);
      nodeFrozen = "sealed";
    }
  }
  const summary = `reseal: ${resealed.length} sealed again, ${held} already held as stored, ${refusedAgents.length} refused; the node's freeze ${nodeFrozen === "sealed" ? "sealed again" : nodeFrozen === "held" ? "already held" : "not set"}`;
  if (tool.json) {
    write(
      `${JSON.stringify({ resealed, already_held: held, refused: refusedAgents, node_frozen: nodeFrozen })}\n`,
    );
  } else {
    write(`${summary}\n`);
  }
  return refusedAgents.length > 0 ? refused(`${refusedAgents.length} policies not sealed again`) : DONE;
}

/**
 * Approves one held action: the action moves from `held` to `approved` and the enclave seals the
 * operator's approval of exactly that action (approve_held, with the admin capability), in one
 * transaction (approveHeldAction); the origin signs it within about a second (an x402
 * authorization when the agent asks again).
 */
async function approve(tool: Tool, command: Command<"approve">): Promise<CliOutcome> {
  const { agentId, actionId } = command;
  const keyRef = await agentKeyRef(tool.db, agentId);
  if (keyRef === null) return refused(`no agent ${agentId}`);
  const action = await actionOf(tool.db, agentId, actionId);
  if (action === null) return refused(`no action ${actionId} of agent ${agentId}`);
  if (action.status !== "held")
    return refused(`action ${actionId} is ${action.status}, not held: nothing to approve`);
  const subject = heldSubjectOf(action, keyRef);
  if (!subject.ok) return refused(`action ${actionId} cannot be approved: ${subject.error}`);
  const nowSeconds = Math.floor(Date.now() / 1000);
  const holdEnds =
    action.expiresAt === null ? Number.POSITIVE_INFINITY : Math.floor(action.expiresAt.getTime() / 1000);
  if (holdEnds <= nowSeconds) {
    return refused(
      `action ${actionId}'s hold ended at ${action.expiresAt?.toISOString()}: it expires, unsigned`,
    );
  }
  // The approval lasts as long as the hold would have (an x402 hold: the quote's validity), at most 7 days.
  const expiresAt = Math.min(holdEnds, nowSeconds + MAX_HELD_APPROVAL_SECONDS);
  const held = { instanceId: tool.identity.instanceId, ...subject.value };
  // The operator signs the action and how long the approval lasts (heldApprovalSubject).
  const operator = tool.signer!.approve("approve_held", heldApprovalSubject(held, expiresAt));
  const decided = await approveHeldAction(tool.db, actionId, () =>
    tool.client.approveHeld({ ...subject.value, expiresAt, operator }, tool.deps.authorize),
  );
  if (!decided.ok) {
    if ("unsealed" in decided.error) return signerOutcome(decided.error.unsealed);
    return refused(
      `action ${actionId} became ${decided.error.status} meanwhile (another operator or its hold's end): nothing approved`,
    );
  }
  return said(
    tool,
    {
      action_id: actionId,
      agent_id: agentId,
      kind: action.kind,
      status: "approved",
      operator_key_id: operator.keyId,
      approval_expires_at: new Date(expiresAt * 1000).toISOString(),
    },
    `action ${actionId} approved (${action.kind} of ${subject.value.valueUnits} units to ${subject.value.to}, operator key ${operator.keyId}); ` +
      (action.kind === "transfer"
        ? "the origin signs it within about a second"
        : "it is signed when the agent asks again with the same idempotency key and nonce"),
  );
}

/** Rejects a held action: it ends `rejected`, never signed. Rejecting only tightens: no key, no enclave. */
async function reject(db: Db, command: Command<"reject">): Promise<CliOutcome> {
  const { agentId, actionId } = command;
  const action = await actionOf(db, agentId, actionId);
  if (action === null) return refused(`no action ${actionId} of agent ${agentId}`);
  if (action.status !== "held")
    return refused(`action ${actionId} is ${action.status}, not held: nothing to reject`);
  const decided = await decideHeld(db, actionId, "rejected");
  if (!decided.ok)
    return refused(`action ${actionId} became ${decided.error.status} meanwhile: nothing rejected`);
  const json = { action_id: actionId, agent_id: agentId, kind: action.kind, status: "rejected" };
  write(command.json ? `${JSON.stringify(json)}\n` : `action ${actionId} rejected: it is never signed\n`);
  return DONE;
}

async function enroll(command: Command<"enroll">, client: SignerClient): Promise<CliOutcome> {
  const policySecret = await readArgumentFile(
    "--policy-key",
    command.policyKeyFile,
    "a 32-byte hex seed",
    readAuthoritySecret,
  );
  if (existsSync(command.operatorKeyFile)) {
    // Only to say which flag is wrong before anything is asked; enrollOperator reads it again.
    await readArgumentFile(
      "--operator-key",
      command.operatorKeyFile,
      "a P-256 private key (PKCS#8 PEM)",
      readOperatorKey,
    );
  }
  const identity = await client.getSealedIdentity();
  if (!identity.ok) return signerOutcome(identity.error);
  const enrolled = await enrollOperator({
    client,
    identity: identity.value,
    policySecret,
    keyFile: command.operatorKeyFile,
    ...(command.keyId === undefined ? {} : { keyId: command.keyId }),
    ...(command.label === undefined ? {} : { label: command.label }),
  });
  if (!enrolled.ok) return signerOutcome(enrolled.error.failure);
  const { keyId, publicKey, created } = enrolled.value;
  const json = { key_id: keyId, public_key: publicKey, key_file: command.operatorKeyFile, created };
  write(
    command.json
      ? `${JSON.stringify(json)}\n`
      : `${created ? `made ${command.operatorKeyFile} (P-256, mode 0600; keep it private)\n` : ""}operator key ${keyId} enrolled\npublic key ${publicKey}\n`,
  );
  return DONE;
}

async function signerOf(
  client: SignerClient,
  identity: SealedIdentity,
  key: OperatorKey,
  command: PolicyToolCommand,
): Promise<OperatorSigner | CliOutcome> {
  const found = await operatorSigner(client, identity, key);
  if (found.ok) return found.value;
  if (found.error.code === "signer") return signerOutcome(found.error.failure);
  const file = "operatorKeyFile" in command ? command.operatorKeyFile : "";
  if (found.error.code === "revoked") {
    return refused(
      `the operator key ${file} was revoked (key id ${found.error.keyId}, at ${found.error.revokedAt.toISOString()}): it approves nothing and is never enrolled again; approve with another operator's key, or enroll a new one`,
    );
  }
  return refused(
    `the operator key ${file} is not enrolled in this enclave (public key ${found.error.publicKey}): npm run policy -- enroll --operator-key ${file} --policy-key FILE`,
  );
}

function changed(
  tool: Tool,
  agentId: string,
  result: Awaited<ReturnType<typeof changeAgentPolicy>>,
  verb = "set",
): CliOutcome {
  if (!result.ok) return changeRefusal(result.error);
  const by = changedBy(tool);
  const operatorKeyId = by.by === "operator" ? by.operatorKeyId : null;
  return said(
    tool,
    {
      agent_id: agentId,
      policy: result.value.document,
      version: result.value.version,
      changed_by: operatorKeyId ? "operator" : "admin",
      operator_key_id: operatorKeyId,
    },
    `agent ${agentId}'s policy ${verb}, version ${result.value.version}${operatorKeyId ? ` (approved by operator key ${operatorKeyId})` : ""}: ${JSON.stringify(result.value.document)}`,
  );
}

function changeRefusal(error: PolicyChangeError): CliOutcome {
  switch (error.code) {
    case "loosening_requires_operator":
      return refused(
        `this change loosens the policy (${error.fields.join(", ")}): it needs --operator-key FILE; nothing changed`,
      );
    case "signer":
      return signerOutcome(error.failure);
  }
}

/** An enclave's refusal (exit 1), or no answer from it (exit 3). */
function signerOutcome(failure: SignerFailure): CliOutcome {
  const named = [failure.detail, failure.rule && `rule ${failure.rule}`].filter(Boolean).join(", ");
  const text = `${failure.code}${named ? ` [${named}]` : ""} (${failure.reason})`;
  return enclaveUnreachable(failure)
    ? errored(`no answer from the enclave: ${text}`)
    : refused(`refused by the enclave: ${text}; nothing changed`);
}

function changedBy(tool: Tool): ChangedBy {
  return tool.signer ? { by: "operator", operatorKeyId: tool.signer.keyId } : { by: "admin" };
}

function said(tool: Tool, json: Record<string, unknown>, line: string): CliOutcome {
  write(tool.json ? `${JSON.stringify(json)}\n` : `${line}\n`);
  return DONE;
}

async function withClient<T>(socketPath: string, use: (client: SignerClient) => Promise<T>): Promise<T> {
  const client = operatorSignerClient(socketPath);
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

/** The policy document of --file: JSON, the agent policy schema, or null for no policy. */
async function readPolicyFile(file: string): Promise<AgentPolicyDocument | null> {
  const text = await readArgumentFile("--file", file, "a readable file", (path) => readFile(path, "utf8"));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--file ${file} is not JSON (${errorMessage(error)})`);
  }
  if (json === null) return null;
  const parsed = agentPolicySchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new UsageError(
      `--file ${file} is not a policy document: ${issue ? `${issue.path.join(".") || "policy"}: ${issue.message}` : "invalid"}`,
    );
  }
  return parsed.data;
}

function write(text: string): void {
  process.stdout.write(text);
}

runCli({ name: "policy", usage: POLICY_TOOL_USAGE, run });
