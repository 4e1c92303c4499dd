/**
 * The suite-wide secret scan (secrets and tokens never reach logs, docs/security.md): every origin, enclave
 * and edge log line and every error body the tests produce is copied into a folder for the run, with every
 * configured secret the tests hand out; at the end of the run (global-setup.ts) the folder is scanned, and
 * any secret or agent token found in it fails the run. Off unless TEST_SECRET_SINK names a folder.
 */
import { openSync, readdirSync, readFileSync, writeSync } from "node:fs";
import path from "node:path";

const SINK_ENV = "TEST_SECRET_SINK";
/** The shape of an agent token; any match in a log line or an error body is a leak. */
const TOKEN_PATTERN = /agt_[0-9a-f]{32}_[0-9a-f]{64}/g;
/** Environment variables whose values are secrets. */
const SECRET_ENV = [
  "AGENT_REGISTRATION_IP_SECRET",
  "AGENT_REGISTRATION_ADMIN_SECRET",
  "AGENT_EDGE_SHARED_SECRET",
  "AGENT_ADMIN_API_TOKEN",
  "EDGE_SHARED_SECRET",
];

const sinkDir = (): string | undefined => process.env[SINK_ENV] || undefined;

/**
 * One descriptor per sink file, kept open for the process's life: the fuzz alone records tens of
 * thousands of answers and log chunks, and opening and closing the file for each of them cost its
 * test fork about 4 % of its CPU. Each write still reaches the file before the call returns.
 */
const openFiles = new Map<string, number>();

function append(file: string, text: string): void {
  let fd = openFiles.get(file);
  if (fd === undefined) {
    fd = openSync(file, "a");
    openFiles.set(file, fd);
  }
  writeSync(fd, text);
}

/** Records the secrets among an environment given to an origin or the edge. */
export function recordSecretsOf(env: Record<string, string | undefined>): void {
  for (const name of SECRET_ENV) {
    const value = env[name];
    if (value) recordSecret(value);
  }
}

export function recordSecret(value: string): void {
  const dir = sinkDir();
  if (dir) append(path.join(dir, `secrets-${process.pid}.txt`), `${value}\n`);
}

/** Copies what a process logged, or a body the service answered, into the run's sink. */
export function recordOutput(source: string, text: string): void {
  const dir = sinkDir();
  if (!dir || text === "") return;
  append(path.join(dir, `output-${process.pid}.log`), `${JSON.stringify({ source, text })}\n`);
}

export type Leak = { file: string; source: string; what: string };

/** Scans a sink folder: every recorded secret and every token-shaped string in any output. */
export function scanSink(dir: string): Leak[] {
  const files = readdirSync(dir);
  const secrets = new Set<string>();
  for (const file of files.filter((name) => name.startsWith("secrets-"))) {
    for (const line of readFileSync(path.join(dir, file), "utf8").split("\n"))
      if (line.length >= 16) secrets.add(line);
  }
  const leaks: Leak[] = [];
  for (const file of files.filter((name) => name.startsWith("output-"))) {
    for (const line of readFileSync(path.join(dir, file), "utf8").split("\n")) {
      if (!line) continue;
      const { source, text } = JSON.parse(line) as { source: string; text: string };
      for (const token of text.match(TOKEN_PATTERN) ?? []) leaks.push({ file, source, what: redact(token) });
      for (const secret of secrets)
        if (text.includes(secret)) leaks.push({ file, source, what: redact(secret) });
    }
  }
  return leaks;
}

/** Enough of a leaked value to find it, not enough to use it. */
const redact = (value: string): string => `${value.slice(0, 8)}… (${value.length} characters)`;

export { SINK_ENV };
