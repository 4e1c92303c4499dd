import { readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../testing/enclave-process.ts";

// docs/enclave.md "Keys and where production keeps them": during a drill and a recovery from a backup folder
// the wallet private keys are in plaintext inside an enclave only. The script side is handed the
// recovery encryption key, so what keeps it from opening a recovery copy is the code it runs. A
// recovery copy is opened with HPKE's open (shared/recovery-envelope.ts hpkeOpen, or the @hpke
// suite itself); the one script module allowed to do so is the air-gapped re-encryption step
// (ops/lib/reencrypt-envelope.ts), and enclave/backup-envelope.ts is the enclave's own.
// This walks every module the drill and recovery programs load and checks that none of them can.

/** The programs (and the library modules other programs call) that drill or recover. */
const DRILL_AND_RECOVER = [
  "ops/restore-drill.ts",
  "ops/lib/restore-driller.ts",
  "ops/recover.ts",
  "ops/lib/recovery.ts",
  "dev/local-money.ts",
  "dev/start.ts",
];
const OPENERS = ["ops/lib/reencrypt-envelope.ts", "enclave/backup-envelope.ts"];
/** Where hpkeOpen is defined; what it exports is checked through its callers. */
const HPKE_MODULE = "shared/recovery-envelope.ts";

const SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[^"';]*?\sfrom\s+)?["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

/** Every repository module `entry` loads, transitively (relative imports; packages are leaves). */
function moduleClosure(entry: string): Map<string, string> {
  const seen = new Map<string, string>();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (seen.has(file)) continue;
    const source = readFileSync(join(REPO_ROOT, file), "utf8");
    seen.set(file, source);
    for (const match of source.matchAll(SPECIFIER)) {
      const specifier = match[1] ?? match[2]!;
      if (!specifier.startsWith(".")) continue;
      pending.push(relative(REPO_ROOT, join(REPO_ROOT, dirname(file), specifier)));
    }
  }
  return seen;
}

/** The modules of a closure (but the HPKE module itself) that could open an HPKE box. */
function modulesThatOpen(closure: Map<string, string>): string[] {
  return [...closure]
    .filter(([file]) => file !== HPKE_MODULE)
    .filter(
      ([file, source]) => OPENERS.includes(file) || /\bhpkeOpen\b/.test(source) || /["']@hpke\//.test(source),
    )
    .map(([file]) => file)
    .sort();
}

describe("no drill or recovery module opens a recovery copy outside an enclave", () => {
  it.each(DRILL_AND_RECOVER)("%s loads no module that opens an HPKE box", (entry) => {
    const closure = moduleClosure(entry);
    expect(modulesThatOpen(closure)).toEqual([]);
    // The walk reached the code it judges: where the recovery key is handed to an enclave.
    expect([...closure.keys()]).toEqual(
      expect.arrayContaining([entry, "ops/lib/recovery-key-loader.ts", HPKE_MODULE]),
    );
  });

  it("sees an opener where there is one: the air-gapped re-encryption step", () => {
    expect(modulesThatOpen(moduleClosure("ops/recovery-reencrypt.ts"))).toEqual([
      "ops/lib/reencrypt-envelope.ts",
    ]);
  });
});
