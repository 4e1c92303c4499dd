/**
 * The node's configuration for an operator tool that uses it (the database, the enclave's
 * endpoint, the env id). An environment the origin would refuse is the operator's to fix, as a bad
 * argument is: a usage error listing every bad variable, never a value.
 */
import { type Config, parseConfig } from "../../origin/config.ts";
import { UsageError } from "./cli-shell.ts";

export function nodeConfig(env: Record<string, string | undefined>): Config {
  const parsed = parseConfig(env);
  if (!parsed.ok) throw new UsageError(`invalid configuration:\n  - ${parsed.error.join("\n  - ")}`);
  return parsed.value;
}
