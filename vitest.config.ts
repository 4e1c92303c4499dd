import { defineConfig } from "vitest/config";

// `.test-probes/` holds throwaway failing fixtures written by testing/exit-code.int.test.ts;
// only that test's child runs (VITEST_RUN_PROBES=1) may collect them.
const runProbes = process.env.VITEST_RUN_PROBES === "1";
// .ci/run asks for a JSON report beside the usual output, to print one `N passed, N failed` line,
// and the list of the slowest files is printed with it.
const jsonReport = process.env.VITEST_JSON_REPORT;

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", ".data/**", ...(runProbes ? [] : [".test-probes/**"])],
    globalSetup: ["./testing/global-setup.ts"],
    // A hang guard, not a speed goal (those live in the benches): tests that spawn a CLI, a stack or
    // a throwaway enclave take tens of seconds when the two cores are shared.
    testTimeout: 90_000,
    hookTimeout: 180_000,
    // expect.poll waits for what a browser or a worker shows next; its default second was too short
    // when CI's two cores were busy (a console confirmation was not on the page within it).
    expect: { poll: { timeout: 15_000 } },
    // Files run in forks so a crashing enclave or devnet cannot take the runner down. Two at once on
    // two cores (vitest's default would be one): an integration file waits on its processes and
    // its chain about half its time (docs/performance.md, "The test suite").
    pool: "forks",
    maxWorkers: 2,
    // Each fork keeps its modules from one file to the next: importing the stack's packages again
    // for every file took about 2 s a file, 470 s of the run's CPU (docs/performance.md, "The test
    // suite"). Each file still has its own database, ports, folders and processes, and restores
    // what it spies on.
    isolate: false,
    // Every enclave a test starts checks each state journal record it writes against its state in
    // memory (enclave/state-store.ts): an op that changes the state where the journal cannot see it
    // fails its test with seal_failed.
    env: { ENCLAVE_VERIFY_STATE_JOURNAL: "1" },
    ...(jsonReport
      ? {
          reporters: ["default", "json", "./testing/slowest-files-reporter.ts"],
          outputFile: { json: jsonReport },
        }
      : {}),
  },
});
