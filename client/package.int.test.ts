import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StackAgent } from "../testing/money-stack.ts";
import { useMoneyStack } from "../testing/stack.ts";

// The client package as an agent's project gets it (docs/agents.md, "From TypeScript"): packed with
// `npm pack` into a tarball, installed into a scratch project in a temporary folder without the
// network, imported by a plain ES module that node runs alone (no tsx), against the real stack; the
// same module run in workerd as a Worker's; and its declarations checked by tsc in that project.

const run = promisify(execFile);
const CLIENT_DIR = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.dirname(CLIENT_DIR);
const TSC = path.join(REPO_ROOT, "node_modules/typescript/bin/tsc");
const SLOW = { timeout: 300_000 };

/** The agent's module: discovery and balance, nothing but the package. */
const PLAIN = `import { createGatewayClient, InsufficientFunds } from "agent-wallet-client";
const wallet = createGatewayClient({ baseUrl: process.env.AGENT_BASE_URL, token: process.env.AGENT_TOKEN });
const network = await wallet.network();
const balance = await wallet.balance();
console.log(JSON.stringify({
  agent_id: network.agent.agent_id,
  wallet: network.agent.assigned_wallet,
  balance: balance.balance,
  typed_errors: typeof new InsufficientFunds("short", { code: "insufficient_funds", body: { needed_units: "5" } }).neededUnits,
}));
`;

/** The docs' viem example: the agent's own viem reads the chain through the gateway's /rpc. */
const WITH_VIEM = `import { chain77, createGatewayClient } from "agent-wallet-client";
import { createPublicClient } from "viem";
const wallet = createGatewayClient({ baseUrl: process.env.AGENT_BASE_URL, token: process.env.AGENT_TOKEN });
const chain = createPublicClient({ chain: chain77("http://unused"), transport: wallet.transport() });
console.log(String(await chain.getBlockNumber()));
`;

/** Typed use of the package: compiles. */
const TYPED = `import { type BalanceResponse, createGatewayClient, InsufficientFunds, isActionEvent, type NetworkResponse } from "agent-wallet-client";
declare const baseUrl: string;
declare const token: string;
const wallet = createGatewayClient({ baseUrl, token });
const network: NetworkResponse = await wallet.network();
const balance: BalanceResponse = await wallet.balance();
const units: string = balance.balance;
const decimals: 6 = network.chain.native_token.decimals;
const refused = new InsufficientFunds("short", { code: "insufficient_funds" });
const needed: bigint | undefined = refused.neededUnits;
for await (const event of wallet.events({ after: "0" })) {
  if (isActionEvent(event)) {
    const status: string = event.data.status;
    console.log(event.id, event.type, event.occurred_at, status);
    // An x402 authorization's event narrows too: its data is the action (docs/events.md#from-the-client).
    if (event.type === "x402.authorization.signed") console.log(event.data.kind);
  }
  break;
}
export { decimals, needed, units };
`;

/** A misuse the declarations must catch: a balance is a decimal string, not a number. */
const MISTYPED = `import { createGatewayClient } from "agent-wallet-client";
declare const baseUrl: string;
const wallet = createGatewayClient({ baseUrl, token: "t" });
const units: number = (await wallet.balance()).balance;
export { units };
`;

describe("the client package (npm pack, installed into another project)", () => {
  const stack = useMoneyStack();
  let scratch: string;
  let app: string;
  let agent: StackAgent;

  beforeAll(async () => {
    scratch = await mkdtemp(path.join(tmpdir(), "client-package-"));
    app = path.join(scratch, "app");
    await mkdir(app);
    agent = await stack.newAgent({ units: 2_500_000n });
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  const env = (): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH,
    HOME: scratch,
    AGENT_BASE_URL: stack.origin.base,
    AGENT_TOKEN: agent.token,
  });

  it(
    "packs, installs with no network and no dependency, and runs under plain node against the service",
    SLOW,
    async () => {
      // prepack builds dist/ (the bundle and the declarations) first.
      await run("npm", ["pack", "--pack-destination", scratch], { cwd: CLIENT_DIR, env: env() });
      const tarball = (await readdir(scratch)).find((name) => name.endsWith(".tgz"));
      expect(tarball).toBe("agent-wallet-client-0.1.0.tgz");

      await writeFile(
        path.join(app, "package.json"),
        JSON.stringify({ name: "agent-project", private: true, type: "module" }),
      );
      // --offline with an empty cache: a dependency to fetch (or a required peer such as viem,
      // which npm installs by itself) fails the install. Mutation: a runtime dependency in
      // client/package.json, or viem as a required peer, fails this.
      const install = await run(
        "npm",
        [
          "install",
          path.join(scratch, tarball!),
          "--offline",
          "--cache",
          path.join(scratch, "npm-cache"),
          "--no-audit",
          "--no-fund",
        ],
        { cwd: app, env: env() },
      );
      const installed = (await readdir(path.join(app, "node_modules"))).filter(
        (name) => !name.startsWith("."),
      );
      expect(installed).toEqual(["agent-wallet-client"]);
      // The package builds when packed, never when installed: a `prepare` script in it is an
      // install script to npm for a tarball, which npm 11 holds back with a warning asking the
      // agent's project to review it, for a build.mjs the package does not even carry.
      const installedManifest = JSON.parse(
        await readFile(path.join(app, "node_modules/agent-wallet-client/package.json"), "utf8"),
      ) as { scripts?: Record<string, string> };
      const installScripts = Object.keys(installedManifest.scripts ?? {}).filter((name) =>
        ["preinstall", "install", "postinstall", "prepare"].includes(name),
      );
      expect(installScripts).toEqual([]);
      expect(`${install.stdout}${install.stderr}`).not.toMatch(/install-scripts|prepare/);

      // Plain node, no loader, no viem in the project. Mutation: building with viem external
      // (a runtime dependency the bundle imports) fails this with ERR_MODULE_NOT_FOUND.
      await writeFile(path.join(app, "plain.mjs"), PLAIN);
      const plain = await run(process.execPath, ["plain.mjs"], { cwd: app, env: env() });
      expect(JSON.parse(plain.stdout)).toEqual({
        agent_id: agent.agentId,
        wallet: agent.wallet.toLowerCase(),
        balance: "2500000",
        typed_errors: "bigint",
      });
    },
  );

  it("carries a readme that says how to install and use it", async () => {
    // "files" listed a README.md that did not exist, so the installed package had none.
    const readme = await readFile(path.join(app, "node_modules/agent-wallet-client/README.md"), "utf8");
    expect(readme).toMatch(/^# agent-wallet-client\n/);
    expect(readme).toContain("npm install /path/to/agent-wallet-client-0.1.0.tgz");
    expect(readme).toContain("createGatewayClient(");
  });

  it("hands the agent's own viem a transport over the gateway's /rpc", SLOW, async () => {
    // The project's viem: the repository's copy stands in for the one the agent installed.
    await symlink(path.join(REPO_ROOT, "node_modules/viem"), path.join(app, "node_modules/viem"), "dir");
    await writeFile(path.join(app, "with-viem.mjs"), WITH_VIEM);
    const block = await run(process.execPath, ["with-viem.mjs"], { cwd: app, env: env() });
    expect(BigInt(block.stdout.trim())).toBeGreaterThan(0n);
  });

  it("runs in a Worker (workerd, through Miniflare) from the same bundle", SLOW, async () => {
    // The installed package's module, loaded as a Worker module beside the agent's own Worker.
    const bundle = await readFile(path.join(app, "node_modules/agent-wallet-client/dist/index.js"), "utf8");
    const worker = new Miniflare({
      modules: [
        {
          type: "ESModule",
          path: "worker.mjs",
          contents: `import { createGatewayClient } from "./agent-wallet-client.mjs";
export default {
  async fetch(_request, env) {
    const wallet = createGatewayClient({ baseUrl: env.AGENT_BASE_URL, token: env.AGENT_TOKEN });
    const [network, balance] = await Promise.all([wallet.network(), wallet.balance()]);
    return Response.json({ agent_id: network.agent.agent_id, balance: balance.balance });
  },
};`,
        },
        { type: "ESModule", path: "agent-wallet-client.mjs", contents: bundle },
      ],
      compatibilityDate: "2026-04-01",
      bindings: { AGENT_BASE_URL: stack.origin.base, AGENT_TOKEN: agent.token },
    });
    try {
      const answer = await worker.dispatchFetch("http://worker.test/");
      expect(await answer.json()).toEqual({ agent_id: agent.agentId, balance: "2500000" });
    } finally {
      await worker.dispose();
    }
  });

  it(
    "gives the project its types: typed use compiles, a misuse is an error in the project's file only",
    SLOW,
    async () => {
      await writeFile(path.join(app, "typed.ts"), TYPED);
      await writeFile(path.join(app, "mistyped.ts"), MISTYPED);
      // The installed readme's example compiles as the project's own code; only `process` is
      // declared, the project having no Node types.
      const readme = await readFile(path.join(app, "node_modules/agent-wallet-client/README.md"), "utf8");
      const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
      expect(example).toContain("createGatewayClient");
      await writeFile(
        path.join(app, "readme.ts"),
        `declare const process: { env: Record<string, string | undefined> };\n${example}export {};\n`,
      );
      // What `tsc --init` writes, for an ES module project: strict, NodeNext, skipLibCheck.
      await writeFile(
        path.join(app, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            lib: ["ES2022", "DOM"],
            types: [],
            strict: true,
            skipLibCheck: true,
            noEmit: true,
          },
          files: ["typed.ts", "mistyped.ts", "readme.ts"],
        }),
      );
      // Mutation: a package without "types" in its exports fails this (TS7016 in both files: the
      // import is untyped, and the misuse is no longer caught).
      const checked = await run(process.execPath, [TSC, "-p", app], { cwd: app, env: env() }).then(
        (ok) => ({ code: 0, stdout: ok.stdout }),
        (failed: { code: number; stdout: string }) => ({ code: failed.code, stdout: failed.stdout }),
      );
      expect(checked.code).toBe(2);
      expect(checked.stdout.trim().split("\n")).toEqual([
        "mistyped.ts(4,7): error TS2322: Type 'string' is not assignable to type 'number'.",
      ]);
    },
  );
});
