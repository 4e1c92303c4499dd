/**
 * Arguments of `npm run policy` (ops/policy.ts), parsed once into a command the tool trusts. What
 * needs an operator's signature without `--operator-key` is a usage error here: nothing is asked.
 */
import { parseArgs } from "node:util";
import { OPERATOR_KEY_ID_PATTERN } from "../../shared/enclave-ops.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { isUuid } from "../../shared/uuid.ts";
import { UsageError } from "./cli-shell.ts";

export const POLICY_TOOL_USAGE = `usage:
  npm run policy -- show --agent ID [--json]
  npm run policy -- set --agent ID --file POLICY.json [--operator-key FILE] [--json]
  npm run policy -- approve --agent ID --action ACTION --operator-key FILE [--json]
  npm run policy -- reject --agent ID --action ACTION [--json]
  npm run policy -- freeze --agent ID | --all [--json]
  npm run policy -- unfreeze --agent ID | --all --operator-key FILE [--json]
  npm run policy -- enroll --operator-key FILE --policy-key FILE [--key-id ID] [--label TEXT] [--json]
  npm run policy -- reseal [--json]
Every command takes --socket PATH (default: AGENT_SIGNER_SVC_HSM_ENDPOINT, else .data/enclave.sock).
The node's configuration gives the database (DATABASE_URL, else the local stack's cluster) and the
admin authority key (AGENT_ADMIN_AUTHORITY_KEY_FILE, else the local stack's .data/admin-authority.key).
set without --operator-key only tightens; a loosening, an unfreeze and an approval need an
enrolled operator key. POLICY.json is the agent's policy document (null: no policy).
enroll makes the operator key file if there is none (0600) and enrolls it with the policy key.
reseal seals every stored agent policy, and the node's freeze, that the enclave does not hold as
stored (after a recovery, whose new enclave holds the keys alone).
Exit: 0 done, 1 refused (by the rules or the enclave), 2 usage, 3 the enclave or database unreachable.`;

/** One agent, or (freeze and unfreeze only) the whole node. */
export type PolicyTarget = { agentId: string } | { all: true };

type Common = { socket: string | undefined; json: boolean };

export type PolicyToolCommand = Common &
  (
    | { command: "show"; agentId: string }
    | { command: "set"; agentId: string; file: string; operatorKeyFile: string | undefined }
    | { command: "approve"; agentId: string; actionId: string; operatorKeyFile: string }
    | { command: "reject"; agentId: string; actionId: string }
    | { command: "freeze"; target: PolicyTarget }
    | { command: "unfreeze"; target: PolicyTarget; operatorKeyFile: string }
    | {
        command: "enroll";
        operatorKeyFile: string;
        policyKeyFile: string;
        keyId: string | undefined;
        label: string | undefined;
      }
    | { command: "reseal" }
  );

const COMMANDS = ["show", "set", "approve", "reject", "freeze", "unfreeze", "enroll", "reseal"] as const;
type CommandName = (typeof COMMANDS)[number];

/** The flags each command takes beside --socket and --json. */
const TAKES: Record<CommandName, readonly string[]> = {
  show: ["agent"],
  set: ["agent", "file", "operator-key"],
  approve: ["agent", "action", "operator-key"],
  reject: ["agent", "action"],
  freeze: ["agent", "all"],
  unfreeze: ["agent", "all", "operator-key"],
  enroll: ["operator-key", "policy-key", "key-id", "label"],
  reseal: [],
};

/** Parses argv (without node and script). */
export function parsePolicyToolArgs(argv: string[]): PolicyToolCommand {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError(errorMessage(error));
  }
  const { values, positionals } = parsed;
  const command = positionals[0];
  if (positionals.length !== 1 || !isCommand(command)) {
    throw new UsageError(`expected one command: ${COMMANDS.join(", ")}`);
  }
  const extra = Object.keys(values).filter(
    (name) => name !== "socket" && name !== "json" && !TAKES[command].includes(name),
  );
  if (extra.length > 0)
    throw new UsageError(`${command} takes no ${extra.map((name) => `--${name}`).join(", ")}`);
  const common: Common = { socket: values.socket, json: values.json ?? false };
  const agent = (): string => {
    if (values.agent === undefined) throw new UsageError(`${command} needs --agent ID`);
    if (!isUuid(values.agent)) throw new UsageError("--agent must be an agent id (a UUID)");
    return values.agent;
  };
  const action = (): string => {
    if (values.action === undefined) throw new UsageError(`${command} needs --action ACTION`);
    if (!isUuid(values.action)) throw new UsageError("--action must be an action id (a UUID)");
    return values.action;
  };
  const operatorKey = (why: string): string => {
    if (!values["operator-key"]) throw new UsageError(`${command} needs --operator-key FILE (${why})`);
    return values["operator-key"];
  };
  const target = (): PolicyTarget => {
    if (values.all && values.agent !== undefined)
      throw new UsageError(`${command} takes --agent ID or --all, not both`);
    if (values.all) return { all: true };
    if (values.agent === undefined) throw new UsageError(`${command} needs --agent ID or --all`);
    return { agentId: agent() };
  };
  switch (command) {
    case "show":
      return { ...common, command, agentId: agent() };
    case "set": {
      const agentId = agent();
      if (!values.file) throw new UsageError("set needs --file POLICY.json");
      return { ...common, command, agentId, file: values.file, operatorKeyFile: values["operator-key"] };
    }
    case "approve": {
      const [agentId, actionId] = [agent(), action()];
      return {
        ...common,
        command,
        agentId,
        actionId,
        operatorKeyFile: operatorKey("an approval is an operator's signature"),
      };
    }
    case "reject":
      return { ...common, command, agentId: agent(), actionId: action() };
    case "freeze":
      return { ...common, command, target: target() };
    case "unfreeze": {
      const unfrozen = target();
      return {
        ...common,
        command,
        target: unfrozen,
        operatorKeyFile: operatorKey("unfreezing loosens, which an operator signs"),
      };
    }
    case "enroll": {
      const operatorKeyFile = operatorKey("the key to enroll; made if the file does not exist");
      if (!values["policy-key"])
        throw new UsageError("enroll needs --policy-key FILE (the policy authority key)");
      const keyId = values["key-id"];
      if (keyId !== undefined && !OPERATOR_KEY_ID_PATTERN.test(keyId)) {
        throw new UsageError("--key-id must be 1 to 64 of A-Z a-z 0-9 . _ : -");
      }
      const label = values.label;
      if (label !== undefined && (label.length === 0 || label.length > 128)) {
        throw new UsageError("--label must be 1 to 128 characters");
      }
      return { ...common, command, operatorKeyFile, policyKeyFile: values["policy-key"], keyId, label };
    }
    case "reseal":
      return { ...common, command };
  }
}

function isCommand(value: string | undefined): value is CommandName {
  return (COMMANDS as readonly string[]).includes(value ?? "");
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      socket: { type: "string" },
      json: { type: "boolean" },
      agent: { type: "string" },
      action: { type: "string" },
      all: { type: "boolean" },
      file: { type: "string" },
      "operator-key": { type: "string" },
      "policy-key": { type: "string" },
      "key-id": { type: "string" },
      label: { type: "string" },
    },
  });
}
