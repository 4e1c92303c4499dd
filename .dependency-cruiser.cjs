// The import rules between the programs and the tool houses (docs/development.md#where-code-lives),
// checked by `npm run lint`. Known violations, those there when a rule came in, are listed in
// .dependency-cruiser-known-violations.json: they pass, any new one fails. The list is empty now;
// regenerate it only when one of them is removed:
//   npx depcruise --config .dependency-cruiser.cjs --output-type baseline . > .dependency-cruiser-known-violations.json

const PROGRAMS = "^(origin|enclave|devnet|edge-worker|shared|client|cli|mcp)/";
const HOUSES = "^(testing|ops|dev|bench|soak)/";
// Test code: test files anywhere, and a program's own test doubles in its testing/ folder.
const TEST_CODE = "(\\.test\\.ts$|^(origin|enclave|devnet|edge-worker|shared|client|cli|mcp)/testing/)";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "program-imports-tool-house",
      comment:
        "A program (origin, enclave, devnet, edge-worker, shared, client, cli, mcp) never imports testing/, ops/, dev/, bench/ or soak/; only its tests may (see the next rule).",
      severity: "error",
      from: { path: PROGRAMS, pathNot: TEST_CODE },
      to: { path: HOUSES },
    },
    {
      name: "program-test-imports-bench-or-soak",
      comment:
        "A program's tests may import testing/ (and drive dev/ and ops/ tools they exercise), never bench/ or soak/.",
      severity: "error",
      from: { path: PROGRAMS },
      to: { path: "^(bench|soak)/" },
    },
    {
      name: "shared-imports-program",
      comment: "shared/ is imported by the programs and imports none of them.",
      severity: "error",
      from: { path: "^shared/", pathNot: TEST_CODE },
      to: { path: "^(origin|enclave|devnet|edge-worker|client|cli|mcp)/" },
    },
    {
      name: "edge-imports-beyond-shared",
      comment: "The edge worker runs on Cloudflare: it imports only shared/ and its own modules.",
      severity: "error",
      from: { path: "^edge-worker/", pathNot: TEST_CODE },
      to: { path: "^(origin|enclave|devnet|client|cli|mcp)/" },
    },
    {
      name: "origin-imports-enclave-or-devnet",
      comment:
        "The origin talks to the enclave over its socket and to the chain over JSON-RPC, never by import.",
      severity: "error",
      from: { path: "^origin/", pathNot: TEST_CODE },
      to: { path: "^(enclave|devnet)/" },
    },
    {
      name: "ops-imports-tool-house",
      comment:
        "Operator tools run in production: they may import origin/ and shared/ modules, never testing/, dev/, bench/ or soak/.",
      severity: "error",
      from: { path: "^ops/", pathNot: TEST_CODE },
      to: { path: "^(testing|dev|bench|soak)/" },
    },
    {
      name: "testing-imported-outside-tests",
      comment:
        "Only tests, bench/ and soak/ import the test harness in testing/: dev/ and ops/ run outside tests (a dev/ tool takes what the suite would give it, such as the secret scan, as a parameter).",
      severity: "error",
      from: { pathNot: `(^(testing|bench|soak)/|${TEST_CODE})` },
      to: { path: "^testing/" },
    },
    {
      name: "outbox-internals-imported",
      comment:
        "The outbox is one service: outside origin/outbox/, programs use what its index exports (docs/architecture.md#from-route-to-receipt-the-outbox), never its files.",
      severity: "error",
      from: { path: "^origin/", pathNot: `(^origin/outbox/|${TEST_CODE})` },
      to: { path: "^origin/outbox/", pathNot: "^origin/outbox/index\\.ts$" },
    },
    {
      name: "domain-imports-another-domain",
      comment:
        "Money (origin/actions/) and x402 (origin/x402/) share what both use through rooms below them (agent-actions/, outbox/), never by importing each other.",
      severity: "error",
      from: { path: "^origin/(actions|x402)/", pathNot: TEST_CODE },
      to: { path: "^origin/(actions|x402)/", pathNot: "^origin/$1/" },
    },
    {
      name: "x402-room-imports-other-room",
      comment:
        "x402's payer side (origin/x402/payer/: authorize) and payee side (origin/x402/payee/: the demo, the facilitator, verify, settle) share what both use through the files at origin/x402/'s root, never by importing each other.",
      severity: "error",
      from: { path: "^origin/x402/(payer|payee)/", pathNot: TEST_CODE },
      to: { path: "^origin/x402/(payer|payee)/", pathNot: "^origin/x402/$1/" },
    },
    {
      name: "origin-import-cycle",
      comment: "No import cycle inside origin/ or between its folders (type-only imports count).",
      severity: "error",
      from: { path: "^origin/" },
      to: { circular: true, viaOnly: { path: "^origin/" } },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: {
      path: "(^|/)(node_modules|\\.data|\\.wrangler|\\.test-probes|\\.test-artifacts|coverage|dist)/",
    },
    // Type-only imports are edges too: a cycle through types still ties the folders together.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".mts", ".js", ".mjs", ".cjs", ".json"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
