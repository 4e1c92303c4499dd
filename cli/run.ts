/**
 * The agent CLI (`agent-wallet`, docs/agents.md): the gateway client behind a command line. The token
 * comes from AGENT_TOKEN only (never an argument, never printed); the base URL from
 * AGENT_BASE_URL or --base-url. Exit codes follow the client's error classes (printed by --help).
 */
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { formatUnits } from "viem";
import {
  type ActionView,
  type AgentEvent,
  createGatewayClient,
  ERROR_CLASSES,
  errorFromAction,
  type GatewayClient,
  GatewayError,
  InsufficientFunds,
  isActionEvent,
  isHeld,
  type MoneyActionResult,
  PaymentOutcomeUnknown,
  type PaymentRequired,
  PolicyDenied,
  PolicyHeld,
  type PolicyPatch,
  paidAnswerText,
  paymentSettlement,
  RateLimited,
  register,
  ServiceUnavailable,
  SignerUnavailable,
  UnexpectedAnswer,
  ValidationFailed,
} from "../client/index.ts";
import { type FetchLike, networkErrorCode } from "../client/request.ts";
import { NATIVE_DECIMALS, WEI_PER_UNIT } from "../shared/constants.ts";
import { errorMessage } from "../shared/error-message.ts";
import { isHttpUrl } from "../shared/http-url.ts";
import { idempotencyKeyProblem } from "../shared/idempotency-key.ts";
import { formatEventLine, formatHuman, proofProgressLine } from "./format.ts";
import { nodeFetch } from "./node-fetch.ts";
import { parseTimeoutSeconds, REQUEST_TIMEOUT_SECONDS, withRequestTimeout } from "./request-timeout.ts";
import { WAITING_NOTICE_AFTER_MS, withWaitingNotice } from "./waiting-notice.ts";

export type CliIo = {
  env: Record<string, string | undefined>;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** For tests (the response check); requests over node:http otherwise (node-fetch.ts). */
  fetch?: FetchLike;
  /** How long a request may go unanswered before the CLI says it waits (WAITING_NOTICE_AFTER_MS). */
  waitingNoticeMs?: number;
  /** Standard input, read whole (`policy check --payment-required -`). */
  readStdin?: () => Promise<string>;
  /**
   * Takes over Ctrl-C (SIGINT, and SIGTERM) for a command that runs until stopped (`watch`): the
   * signal aborts when one comes, and the command ends with exit 0. Other commands never call it,
   * so Ctrl-C stops them as it stops any program (after onStopped's line, for those that have one).
   */
  stopSignal?: () => AbortSignal;
  /**
   * Takes over Ctrl-C (SIGINT, and SIGTERM) for a command whose request may have done something
   * (a money command, `pay`, `register`, `rotate-token`): the line `said` returns goes to stderr,
   * then the signal ends the process as it ends any program.
   */
  onStopped?: (said: () => string) => void;
};

export const EXIT_OK = 0;
export const EXIT_USAGE = 2;
/**
 * `pay`: the resource answered, with an error status of its own (4xx or 5xx), printed as any answer
 * (its first line says whether it was paid). Exit 0 told a script that a 404 or a 500 had bought it
 * something.
 */
export const EXIT_RESOURCE_ERROR = 28;

const COMMANDS = [
  "network",
  "balance",
  "faucet",
  "transfer",
  "action",
  "pay",
  "register",
  "rotate-token",
  "policy",
  "watch",
] as const;
type Command = (typeof COMMANDS)[number];

export function helpText(): string {
  const codes = ERROR_CLASSES.map(
    (errorClass) => `  ${String(errorClass.exitCode).padStart(2)}  ${errorClass.name}: ${errorClass.family}`,
  );
  return [
    "usage: agent-wallet <command> [options]",
    "",
    "commands:",
    "  network                          discovery: chain, identity, allowlist, limits, features",
    "  balance                          the assigned wallet's balance",
    "  faucet [--key K] [--wait]        a faucet payout to the assigned wallet (--wait: until it ends)",
    "  transfer --to ADDR --amount U [--key K] [--wait]",
    "                                   a transfer; U in 6-decimal units (1 USDC = 1000000)",
    "  action ID [--wait]               an action's status (--wait: until it ends; an x402 one at signed);",
    "                                   a failed or reverted action exits with its error's code",
    "  pay URL [--key K] [--method M] [--data BODY]",
    "                                   fetch URL, paying a 402 once through the gateway; prints the",
    "                                   settlement's transaction, then the resource; the same command",
    "                                   again is the same payment (a new --key buys again); --data",
    "                                   needs a --method with a body (POST, …): a GET carries none",
    "  register                         a new token and wallet (never retried; the token is shown once;",
    "                                   a proof of work the service asks for is solved first)",
    "  rotate-token                     a new token for this identity (wallet, capabilities, actions and",
    "                                   limits stay), printed once; the old one stops working. Never retried",
    "  policy                           the spending policy: the document, each budget's use, its reset",
    "  policy check --to ADDR --amount U",
    "  policy check --payment-required FILE|-",
    "                                   what a transfer, or an x402 quote (a 402's body; - reads stdin),",
    "                                   would meet now: allow (exit 0), hold (25) or deny (23), the rule",
    "                                   and what remains under it; signs and reserves nothing",
    "  policy set --file PATCH.json     a JSON merge patch of the policy that tightens it (null removes a",
    "                                   field, lists are replaced); a loosening exits 24, changing nothing",
    "  policy freeze                    freeze this agent: every money request refused (only an operator",
    "                                   unfreezes it)",
    "  watch [--after ID]               follow your actions' events as they happen, one line each (time,",
    "                                   type, action, status, amount; --json: one JSON object a line);",
    "                                   from now, or right after event ID (0: every event kept). Resumes",
    "                                   by itself after a dropped connection; Ctrl-C ends it, exit 0",
    "",
    "holds:",
    "  a transfer the spending policy holds for a person's approval prints the action (held, its rule",
    "  and expiry) and exits 25; with --wait it waits while held or approved, up to the hold's expiry,",
    "  then as any transfer (0 once confirmed; 23 once rejected or expired). A payment held exits 25:",
    "  nothing was paid; once an operator approves it, run the same pay command with --key K.",
    "",
    "options:",
    "  --base-url URL   the service base, chain segment included (default: $AGENT_BASE_URL)",
    "  --json           one JSON document on stdout (errors too)",
    "  --key K          the idempotency key; repeat with the key of a call whose answer was lost",
    `  --timeout S      how long one request may go without its whole answer, in seconds (default`,
    `                   $AGENT_TIMEOUT_SECONDS, else ${REQUEST_TIMEOUT_SECONDS}); past it exit 19 (gateway_timeout; a paid request's`,
    "                   17). A --wait read gets its wait on top; watch has its own idle timeout instead",
    "  -h, --help       this text",
    "",
    "environment:",
    "  AGENT_TOKEN      the agent's bearer token (never pass it as an argument)",
    "  AGENT_BASE_URL   e.g. http://127.0.0.1:8787/77",
    "  AGENT_TIMEOUT_SECONDS  as --timeout",
    "",
    "retries:",
    "  faucet and transfer print their idempotency key, with the answer or the error. Exit 14 or 19:",
    "  nothing was signed, or the answer was lost: run the same command with --key K; the gateway",
    "  runs it again or answers what it did, never a second payment (within 10 minutes; after that",
    "  the request is abandoned, exit 20). Any other refusal that names an action_id (a limit, the",
    "  funds, the funding gate, the faucet's cooldown, a revert) is final for its key: the same key",
    "  answers the same refusal; once the cause is gone, send a new request (a new key). Errors",
    "  without an action_id (a bad token or argument, too many requests) recorded nothing. --wait",
    "  exits 0 only once the action is confirmed. A request with no answer after 2 s prints one line",
    "  on stderr saying what the command waits for (and the key to retry a money command with); so",
    "  does a faucet or transfer --wait still waiting after 2 s (a held one: for an operator), and",
    "  Ctrl-C says the key as it stops a money command (the same command with it: never a second).",
    "",
    "exit codes:",
    `   ${EXIT_OK}  success`,
    `   ${EXIT_USAGE}  usage: an unknown command or option, one the command does not take, a missing argument, AGENT_TOKEN unset`,
    ...codes,
    `  ${EXIT_RESOURCE_ERROR}  pay: the resource's own answer is an error (4xx or 5xx), printed as any; its first line`,
    "      says whether it was paid",
  ].join("\n");
}

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  // Known before the arguments parse, so that even a usage error is one JSON document under --json.
  const json = argv.includes("--json");
  const usage = (message: string): number => {
    if (json) {
      const error = { name: "UsageError", code: "usage", message, exit_code: EXIT_USAGE };
      io.stdout(`${JSON.stringify({ error }, null, 2)}\n`);
    } else {
      io.stderr(`agent-wallet: ${message}\nRun agent-wallet --help for usage.\n`);
    }
    return EXIT_USAGE;
  };
  // A token given as an argument (`agent-wallet "$AGENT_TOKEN" balance`, `action agt_…`) was echoed
  // by the usage error naming the unknown command, or sent in a URL's path, into the gateway's
  // logs, and printed by the error naming that URL: refused first, the argument not repeated.
  if (argv.some((arg) => holdsToken(arg, io.env.AGENT_TOKEN))) {
    return usage(
      "an argument holds an agent token; the token is read from AGENT_TOKEN only, never an argument (nothing was sent, and the argument is not repeated here)",
    );
  }
  let parsed: ReturnType<typeof parseCli>;
  try {
    parsed = parseCli(argv);
  } catch (error) {
    return usage(errorMessage(error));
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout(`${helpText()}\n`);
    return EXIT_OK;
  }
  if (positionals.length === 0) {
    if (json) return usage("no command given");
    io.stdout(`${helpText()}\n`);
    return EXIT_USAGE;
  }
  const command = positionals[0] as Command;
  if (!COMMANDS.includes(command)) return usage(`unknown command: ${positionals[0]}`);
  // An option another command takes was ignored: `pay URL --amount 100` paid the quote's price,
  // whatever it was, and `faucet --amount` its payout. Refused, nothing sent.
  const taken = optionsOf(command, positionals[1]);
  const ignored = Object.keys(values).find((name) => !COMMON_OPTIONS.includes(name) && !taken.includes(name));
  if (ignored !== undefined) {
    return usage(
      `${command === "policy" && positionals[1] ? `policy ${positionals[1]}` : command} does not take --${ignored}`,
    );
  }
  const baseUrl = values["base-url"] ?? io.env.AGENT_BASE_URL;
  if (!baseUrl) return usage("no base URL: set AGENT_BASE_URL or pass --base-url");
  // `localhost:8787/77` parses as a URL of scheme `localhost:`: sent anyway, it failed as an
  // unreachable gateway (exit 19, "retry with the same key"), which no retry can mend.
  if (!isHttpUrl(baseUrl))
    return usage("the base URL must be an http:// or https:// URL, such as http://127.0.0.1:8787/77");
  // A money command's key is made here when not given, so that everything the CLI prints while
  // the request is out (the waiting notice) can name it. A payment's is the gateway's, derived from
  // the agent, the resource and the quote (docs/x402.md#payment-identifiers): the same command
  // again is the same payment.
  if (command === "faucet" || command === "transfer") values.key ??= `${command}-${crypto.randomUUID()}`;
  if (command === "watch") {
    const token = io.env.AGENT_TOKEN;
    if (!token) return usage("AGENT_TOKEN is not set (the token is read from the environment only)");
    if (positionals.length > 1) return usage(usageOf(command, undefined));
    // The built-in fetch: node-fetch.ts reads a whole body before it answers, and a stream has no end.
    const client = createGatewayClient({
      baseUrl,
      token,
      fetch: io.fetch ?? globalThis.fetch.bind(globalThis),
    });
    try {
      await watchEvents(client, values, io);
      return EXIT_OK;
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      return printError(error, json, io, true);
    }
  }
  // Every request but the event stream's (a stream has no end; events() has its idle timeout).
  const timeoutText = values.timeout ?? io.env.AGENT_TIMEOUT_SECONDS;
  const timeoutMs =
    timeoutText === undefined ? REQUEST_TIMEOUT_SECONDS * 1000 : parseTimeoutSeconds(timeoutText);
  if (timeoutMs === undefined) {
    return usage(
      `${values.timeout === undefined ? "AGENT_TIMEOUT_SECONDS" : "--timeout"} must be a number of seconds, more than 0 and at most a day`,
    );
  }
  // `pay`'s key, once its payment is presented: what the waiting line tells the agent to run again with.
  const payment: PaymentInFlight = { presentedKey: undefined };
  const fetchFn = withWaitingNotice(withRequestTimeout(io.fetch ?? nodeFetch, timeoutMs), {
    write: io.stderr,
    advice: () => waitingAdvice(command, values.key, payment),
    afterMs: io.waitingNoticeMs,
  });

  // Stopped before the waiting notice is due (2 s), or during a --wait, a money command said nothing:
  // its generated key was lost, and the same command again was a second transfer.
  const stopAdvice = stoppedAdvice(command, values.key, payment);
  if (stopAdvice !== undefined) io.onStopped?.(() => `agent-wallet: stopped; ${stopAdvice()}\n`);
  try {
    if (values.key !== undefined) checkKeyArgument(values.key);
    let result: unknown;
    if (command === "register") {
      // A service with the proof of work on: solved without asking; one line on stderr once it
      // has taken more than a moment (the client reports each second), stdout unchanged.
      let told = false;
      result = await register({
        baseUrl,
        fetch: fetchFn,
        onProofOfWork: (progress) => {
          if (told) return;
          told = true;
          io.stderr(`${proofProgressLine(progress)}\n`);
        },
      });
    } else {
      const token = io.env.AGENT_TOKEN;
      if (!token) return usage("AGENT_TOKEN is not set (the token is read from the environment only)");
      const client = createGatewayClient({ baseUrl, token, fetch: fetchFn });
      const run = await runCommand(client, command, positionals.slice(1), values, io, payment);
      if (typeof run === "number") return run === EXIT_USAGE ? usage(usageOf(command, positionals[1])) : run;
      if (run instanceof Exited) {
        const shown = command === "policy" ? "policy-check" : command;
        io.stdout(`${json ? JSON.stringify(run.result, null, 2) : formatHuman(shown, run.result)}\n`);
        return run.exitCode;
      }
      result = run;
    }
    io.stdout(`${json ? JSON.stringify(result, null, 2) : formatHuman(command, result)}\n`);
    return EXIT_OK;
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    return printError(error, json, io);
  }
}

/** A command's error on stdout (--json: one object, one line for `watch`'s NDJSON) or stderr. */
function printError(error: GatewayError, json: boolean, io: CliIo, compact = false): number {
  if (json) {
    io.stdout(`${JSON.stringify({ error: describeError(error) }, null, compact ? undefined : 2)}\n`);
  } else {
    io.stderr(`agent-wallet: ${error.name} [${error.code}]: ${error.message}${errorSuffix(error)}\n`);
    if (error.idempotencyKey !== undefined) io.stderr(`${keyAdvice(error, error.idempotencyKey)}\n`);
  }
  return error.exitCode;
}

/**
 * `watch`: each event on its own line as it comes, until Ctrl-C (docs/events.md#from-the-cli). The
 * client's events() resumes after a dropped connection, so the command does not end with one.
 */
async function watchEvents(client: GatewayClient, values: Values, io: CliIo): Promise<void> {
  const signal = io.stopSignal?.();
  for await (const event of client.events({ after: values.after, signal })) {
    if (!values.json) readableAction(event);
    io.stdout(`${values.json ? JSON.stringify(event) : formatEventLine(event)}\n`);
  }
}

/**
 * Throws UnexpectedAnswer for an action event whose amount the human line cannot read (the
 * gateway's is a decimal string of units, or null): only a stream that is not the gateway's sends
 * one, and reading it as a number would end the command with a TypeError's stack instead.
 */
function readableAction(event: AgentEvent): void {
  if (!isActionEvent(event)) return;
  const amount: unknown = event.data.amount;
  if (amount === undefined || amount === null || (typeof amount === "string" && /^\d+$/.test(amount))) return;
  throw new UnexpectedAnswer(
    `the event stream sent event ${event.id} (${event.type}) whose amount is not a decimal string of units: not the gateway's answer; is the base URL the gateway's (chain segment included)?`,
    { code: "unexpected_answer" },
  );
}

type Values = ReturnType<typeof parseCli>["values"];

/** An agent token's shape (shared/agent-token.ts), anywhere in an argument. */
const TOKEN_SHAPE = /agt_[0-9a-f]{32}_[0-9a-f]{64}/i;

/** Whether `arg` holds a token: one of a token's shape, or the one AGENT_TOKEN holds. */
function holdsToken(arg: string, token: string | undefined): boolean {
  const own = token?.trim();
  return TOKEN_SHAPE.test(arg) || (own !== undefined && own.length >= 8 && arg.includes(own));
}

function parseCli(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      "base-url": { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      key: { type: "string" },
      to: { type: "string" },
      amount: { type: "string" },
      wait: { type: "boolean" },
      method: { type: "string" },
      data: { type: "string" },
      file: { type: "string" },
      "payment-required": { type: "string" },
      after: { type: "string" },
      timeout: { type: "string" },
    },
  });
}

/** The options every command takes. */
const COMMON_OPTIONS: readonly string[] = ["base-url", "json", "help", "timeout"];

/** The options `command` (with `sub`, policy's subcommand) takes besides the common ones. */
function optionsOf(command: Command, sub: string | undefined): readonly string[] {
  switch (command) {
    case "faucet":
      return ["key", "wait"];
    case "transfer":
      return ["to", "amount", "key", "wait"];
    case "action":
      return ["wait"];
    case "pay":
      return ["key", "method", "data"];
    case "policy":
      return sub === "check" ? ["to", "amount", "payment-required"] : sub === "set" ? ["file"] : [];
    case "watch":
      return ["after"];
    default:
      return [];
  }
}

function usageOf(command: Command, sub: string | undefined): string {
  switch (command) {
    case "policy":
      return sub === "check"
        ? "policy check needs --to ADDRESS and --amount UNITS, or --payment-required FILE|-"
        : sub === "set"
          ? "policy set needs --file PATCH.json"
          : "policy takes no argument, or one of: check, set, freeze";
    case "transfer":
      return "transfer needs --to ADDRESS and --amount UNITS";
    case "action":
      return "action needs an action id";
    case "pay":
      return "pay needs a URL";
    case "watch":
      return "watch takes no arguments but its options (--after ID, --json)";
    default:
      return `${command} takes no arguments`;
  }
}

/** A result printed as any other, with an exit code of its own (a hold, a check's deny). */
class Exited {
  constructor(
    readonly result: unknown,
    readonly exitCode: number,
  ) {}
}

/** An answer a script branches on without parsing: held is 25, a check's deny 23 (the error table's). */
function exitOf(decision: "allow" | "hold" | "deny"): number {
  return decision === "allow" ? EXIT_OK : decision === "hold" ? PolicyHeld.exitCode : PolicyDenied.exitCode;
}

async function runCommand(
  client: GatewayClient,
  command: Exclude<Command, "register" | "watch">,
  args: string[],
  values: Values,
  io: CliIo,
  payment: PaymentInFlight,
): Promise<unknown> {
  switch (command) {
    case "policy":
      return runPolicy(client, args, values, io);
    case "network":
      return args.length === 0 ? client.network() : EXIT_USAGE;
    case "balance":
      return args.length === 0 ? client.balance() : EXIT_USAGE;
    case "faucet": {
      if (args.length > 0) return EXIT_USAGE;
      const action = await client.faucet({ idempotencyKey: values.key });
      return values.wait ? waitForMoney(client, action, io) : heldExit(action);
    }
    case "transfer": {
      if (args.length > 0 || !values.to || !values.amount) return EXIT_USAGE;
      const action = await client.transfer({
        to: values.to,
        amount: wholeUnits(values.amount),
        idempotencyKey: values.key,
      });
      return values.wait ? waitForMoney(client, action, io) : heldExit(action);
    }
    case "action": {
      // An empty id (`action "$ID"` with ID unset) would ask GET /actions/, which is no action's.
      if (args.length !== 1 || args[0]!.trim() === "") return EXIT_USAGE;
      const action = await client.action(args[0]!);
      if (values.wait) return client.waitForAction(args[0]!, { timeoutMs: waitTimeout(action) });
      // Read, it still is the outcome the agent acts on: a failed action is its error, not exit 0.
      const failed = errorFromAction(action);
      if (failed) throw failed;
      return action.status === "held" ? new Exited(action, PolicyHeld.exitCode) : action;
    }
    case "rotate-token":
      return args.length === 0 ? client.rotateToken() : EXIT_USAGE;
    case "pay": {
      if (args.length !== 1) return EXIT_USAGE;
      const url = resourceUrl(args[0]!);
      const method = requestMethod(values.method ?? "GET");
      // fetch refuses a body on a GET or HEAD; node:http sent it, the resource ignored it, and the
      // agent paid for the GET's answer, its data never read.
      if (values.data !== undefined && ["GET", "HEAD"].includes(method.toUpperCase())) {
        throw new ValidationFailed(
          `--data needs --method with a body, such as POST: a ${method.toUpperCase()} request carries none (nothing was sent)`,
          { code: "validation_failed" },
        );
      }
      let response: Response;
      try {
        response = await client.fetchWithPayment(
          url,
          { method, ...(values.data === undefined ? {} : { body: values.data }) },
          {
            ...(values.key === undefined ? {} : { idempotencyKey: values.key }),
            onPresenting: (key) => {
              payment.presentedKey = key;
            },
          },
        );
      } catch (error) {
        if (error instanceof GatewayError) throw error;
        // The client's own failures are all typed; only the first, unpaid request fails as fetch
        // does (a paid one that gets no answer is PaymentOutcomeUnknown): nothing was paid.
        throw new ServiceUnavailable(
          `no answer from ${method.toUpperCase()} ${url.origin}${url.pathname} (${withNetworkCode(errorMessage(error), error)}): nothing was paid; the same command may run again`,
          { code: "resource_unreachable", cause: error },
        );
      }
      // A body cut off after the headers is still a paid answer: the error names the transaction.
      const text = await paidAnswerText(response);
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {}
      // The settlement decoded: the transaction that paid is what the agent keeps as its receipt.
      const answer = { status: response.status, settlement: paymentSettlement(response) ?? null, body };
      return response.status >= 400 ? new Exited(answer, EXIT_RESOURCE_ERROR) : answer;
    }
  }
}

/**
 * `--key K` as the gateway takes it, or ValidationFailed (exit 6) before anything is sent: an empty
 * one (`--key "$KEY"` with KEY unset, in a retry) reached the gateway only to be refused there.
 */
function checkKeyArgument(key: string): void {
  const problem = idempotencyKeyProblem(key);
  if (problem === undefined) return;
  const unset = key === "" ? ' (an empty --key "$KEY" is usually a KEY that is not set)' : "";
  throw new ValidationFailed(`--key: ${problem}${unset}`, { code: "validation_failed" });
}

/** The resource `pay` asks: an http(s) URL, or ValidationFailed (exit 6) before anything is sent. */
function resourceUrl(text: string): URL {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (url?.protocol !== "http:" && url?.protocol !== "https:") {
    throw new ValidationFailed("pay needs an http or https URL", { code: "validation_failed" });
  }
  return url;
}

/**
 * The method `pay --method` asks with: an HTTP token (RFC 9110), or ValidationFailed (exit 6) before
 * anything is sent. node:http refused one with a space as a network failure: exit 19, "the same
 * command may run again", which no retry mends.
 */
function requestMethod(text: string): string {
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(text)) {
    throw new ValidationFailed("--method must be an HTTP method, such as GET or POST", {
      code: "validation_failed",
    });
  }
  return text;
}

/** A failure's message and, where the message does not name it, its network code (ECONNREFUSED, …). */
function withNetworkCode(message: string, error: unknown): string {
  const code = networkErrorCode(error);
  return code === undefined || message.includes(code) ? message : `${message}, ${code}`;
}

/** `policy [check|set|freeze]` (docs/agents.md, "The agent's tools"). */
async function runPolicy(client: GatewayClient, args: string[], values: Values, io: CliIo): Promise<unknown> {
  const [sub, ...rest] = args;
  if (rest.length > 0) return EXIT_USAGE;
  switch (sub) {
    case undefined:
      return client.policy();
    case "freeze":
      return client.updatePolicy({ frozen: true });
    case "set": {
      if (!values.file) return EXIT_USAGE;
      const patch = parseJsonInput(await readInput(values.file, io), "--file");
      if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
        throw new ValidationFailed("--file must hold a JSON object (a merge patch of the policy)", {
          code: "validation_failed",
        });
      }
      return client.updatePolicy(patch as PolicyPatch);
    }
    case "check": {
      let answer: Awaited<ReturnType<GatewayClient["checkPolicy"]>>;
      if (values["payment-required"] !== undefined) {
        if (values.to !== undefined || values.amount !== undefined) return EXIT_USAGE;
        const quote = parseJsonInput(await readInput(values["payment-required"], io), "--payment-required");
        answer = await client.checkPolicy({ x402: { paymentRequired: quote as PaymentRequired } });
      } else {
        if (!values.to || !values.amount) return EXIT_USAGE;
        answer = await client.checkPolicy({ transfer: { to: values.to, amount: wholeUnits(values.amount) } });
      }
      return new Exited(answer, exitOf(answer.decision));
    }
    default:
      return EXIT_USAGE;
  }
}

/** A file's text, or standard input's for `-`. */
async function readInput(source: string, io: CliIo): Promise<string> {
  if (source === "-") {
    if (!io.readStdin)
      throw new ValidationFailed("standard input is not available", { code: "validation_failed" });
    return io.readStdin();
  }
  try {
    return await readFile(source, "utf8");
  } catch (cause) {
    throw new ValidationFailed(`cannot read ${source}: ${errorMessage(cause)}`, {
      code: "validation_failed",
      cause,
    });
  }
}

function parseJsonInput(text: string, option: string): unknown {
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ValidationFailed(`${option} is not JSON: ${errorMessage(cause)}`, {
      code: "validation_failed",
      cause,
    });
  }
}

/**
 * `--amount` as the gateway takes it (shared/gateway-schemas.ts, unitsAmountSchema), or
 * ValidationFailed (exit 6) before anything is sent: 0, 007 and an amount past a uint256 in wei
 * were sent, with the token, only to be refused there.
 */
function wholeUnits(amount: string): string {
  if (!/^[1-9][0-9]{0,77}$/.test(amount) || BigInt(amount) * WEI_PER_UNIT > MAX_UINT256) {
    throw new ValidationFailed(
      "--amount must be a positive whole number of 6-decimal units without a leading zero (1 USDC = 1000000), its wei value within a uint256",
      { code: "validation_failed" },
    );
  }
  return amount;
}

const MAX_UINT256 = (1n << 256n) - 1n;

/** A money action held for approval prints as any answer and exits 25; anything else exits 0. */
function heldExit(action: MoneyActionResult): MoneyActionResult | Exited {
  return isHeld(action) ? new Exited(action, PolicyHeld.exitCode) : action;
}

/**
 * How long --wait follows an action: the client's default, or while it is held or approved up to
 * the hold's expiry and a minute more (the expiry is swept, not instant).
 */
function waitTimeout(action: Pick<ActionView, "status" | "expires_at">): number | undefined {
  if ((action.status !== "held" && action.status !== "approved") || !action.expires_at) return undefined;
  return Math.max(Date.parse(action.expires_at) - Date.now(), 0) + 60_000;
}

/**
 * A money action followed to its end; a failure throws with the request's key (client.waitForAction).
 * A wait that goes on says once on stderr what it waits for, with the key: its reads ask the
 * service to hold them (`?wait=`), which the waiting notice leaves unsaid, and a held transfer waits
 * for a person up to its expiry. Stopped without the key, the same command again was a second
 * transfer (held again, for an operator to approve as well).
 */
async function waitForMoney(
  client: GatewayClient,
  action: MoneyActionResult,
  io: CliIo,
): Promise<ActionView & { idempotency_key: string }> {
  const held = isHeld(action)
    ? ` by rule ${action.rule} until ${action.expires_at} for an operator's decision`
    : "";
  const notice = setTimeout(
    () =>
      io.stderr(
        `agent-wallet: action ${action.action_id} is ${action.status}${held}; still waiting (it is safe to stop and run the same command with --key ${action.idempotency_key}: never a second payment)\n`,
      ),
    io.waitingNoticeMs ?? WAITING_NOTICE_AFTER_MS,
  );
  try {
    const timeoutMs = waitTimeout(action);
    return {
      ...(await client.waitForAction(action.action_id, { timeoutMs })),
      idempotency_key: action.idempotency_key,
    };
  } catch (error) {
    if (error instanceof GatewayError) error.idempotencyKey ??= action.idempotency_key;
    throw error;
  } finally {
    clearTimeout(notice);
  }
}

/**
 * The error as one JSON object: the service's whole error object (its `limit`, `limit_units`,
 * `remaining_units`, `reason`, `action_id`, … as sent), with the class, the HTTP status, the
 * request's idempotency key and the exit code.
 */
function describeError(error: GatewayError): Record<string, unknown> {
  return {
    ...error.body,
    name: error.name,
    code: error.code,
    message: error.message,
    ...(error.status === undefined ? {} : { status: error.status }),
    ...(error.requestId === undefined ? {} : { request_id: error.requestId }),
    ...(error instanceof RateLimited && error.retryAfter !== undefined
      ? { retry_after: error.retryAfter }
      : {}),
    ...(error.idempotencyKey === undefined ? {} : { idempotency_key: error.idempotencyKey }),
    exit_code: error.exitCode,
  };
}

/** What a human reads after the service's message: when to retry, or the figures in USDC. */
function errorSuffix(error: GatewayError): string {
  if (error instanceof RateLimited && error.retryAfter !== undefined) {
    return ` (retry after ${error.retryAfter}s)`;
  }
  if (error instanceof PolicyDenied && error.rule !== undefined) {
    return ` (rule ${error.rule}, remaining ${error.remaining ?? "unknown"})`;
  }
  if (error instanceof PolicyHeld) {
    return ` (action ${error.actionId ?? "?"})`;
  }
  if (error instanceof InsufficientFunds) {
    const { neededUnits, availableUnits } = error;
    if (neededUnits !== undefined && availableUnits !== undefined) {
      return ` (needs ${formatUnits(neededUnits, NATIVE_DECIMALS)} USDC, ${formatUnits(availableUnits, NATIVE_DECIMALS)} USDC available)`;
    }
  }
  return "";
}

/** The key `pay`'s payment is stored under, once it was presented to the resource. */
type PaymentInFlight = { presentedKey: string | undefined };

/**
 * What the waiting notice adds (docs/agents.md, "The agent's tools"): a money request may be stopped
 * and sent again with its key, which never pays twice; a registration must never be sent again.
 */
function waitingAdvice(
  command: Command,
  key: string | undefined,
  payment: PaymentInFlight,
): string | undefined {
  switch (command) {
    case "faucet":
    case "transfer":
      return `a money request may wait for the service's signer; it is safe to stop and run the same command with --key ${key}: never a second payment`;
    case "pay": {
      // Once presented, only the key finds this payment again: the same command without it, run
      // after the authorization can no longer pay, is a new purchase (docs/x402.md#payment-identifiers).
      const presented = key ?? payment.presentedKey;
      return presented === undefined
        ? "nothing has been presented to the resource yet; it is safe to stop and run the same command again"
        : `it is safe to stop and run the same command with --key ${presented}: it presents the same authorization, never a second payment`;
    }
    case "register":
      return "do not run register again if you stop it: a lost answer may already have created the identity";
    case "rotate-token":
      return "if you stop it and AGENT_TOKEN then answers AgentAuthFailed, the rotation went through and its token is lost: the service's operator can issue another";
    default:
      return undefined;
  }
}

/**
 * What an agent that stopped the command (Ctrl-C) may do: read when the signal comes, for `pay`'s key
 * is known only once its payment is presented. Undefined for a read, which any run repeats.
 */
function stoppedAdvice(
  command: Command,
  key: string | undefined,
  payment: PaymentInFlight,
): (() => string) | undefined {
  switch (command) {
    case "faucet":
    case "transfer":
      return () =>
        `the request may have reached the service: run the same command with --key ${key} to learn what it came to (never a second payment)`;
    case "pay":
    case "register":
    case "rotate-token":
      return () => waitingAdvice(command, key, payment) ?? "";
    default:
      return undefined;
  }
}

/** What the key of a failed money command is good for (the --help "retries" text). */
function keyAdvice(error: GatewayError, key: string): string {
  const retry =
    error instanceof SignerUnavailable ||
    error instanceof ServiceUnavailable ||
    error instanceof PaymentOutcomeUnknown;
  if (error instanceof PolicyHeld) {
    return `idempotency key ${key}: once an operator approves it, run the same command with --key ${key} to pay it (once)`;
  }
  if (error instanceof UnexpectedAnswer) {
    return `idempotency key ${key}: the request may have reached the service; once the base URL answers as the gateway, run the same command with --key ${key} to learn what it came to (never a second payment)`;
  }
  return retry
    ? `idempotency key ${key}: run the same command with --key ${key} to retry it (never a second payment)`
    : error.body.action_id !== undefined
      ? `idempotency key ${key}: this refusal is final for the key (the same key answers it again); a new request needs a new key`
      : `idempotency key ${key}: nothing was recorded under it`;
}
