/**
 * `npm run mcp`: the agent wallet's MCP server on stdio. AGENT_TOKEN and AGENT_BASE_URL come from
 * the environment (the MCP host's configuration), never from a tool call. Logs go to stderr:
 * stdout carries the protocol.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { isHttpUrl } from "../shared/http-url.ts";
import { noArgumentsCommand } from "../shared/no-arguments.ts";
import { ignoreUnreadOutput } from "../shared/node/unread-output.ts";
import { parseHostTimeout } from "./host-timeout.ts";
import { createWalletMcpServer } from "./server.ts";

const USAGE = `usage: AGENT_TOKEN=agt_… AGENT_BASE_URL=http://127.0.0.1:8787/77 npm run mcp
  a stdio MCP server for an MCP host to start (docs/agents.md): the token and base URL come from
  the environment only, never as arguments; AGENT_MCP_HOST_TIMEOUT_SECONDS is the host's request
  timeout (60 by default, as the official client's), which every tool call answers within`;

// Served on a terminal, any argument would be ignored and the protocol wait silent on stdin.
const args = noArgumentsCommand(process.argv.slice(2));
if (args === "help") {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
if (args === "refused") {
  process.stderr.write(`agent-wallet mcp: takes no arguments\n${USAGE}\n`);
  process.exit(2);
}

const token = process.env.AGENT_TOKEN;
const baseUrl = process.env.AGENT_BASE_URL;
if (!token || !baseUrl) {
  process.stderr.write(
    "agent-wallet mcp: set AGENT_TOKEN and AGENT_BASE_URL (e.g. http://127.0.0.1:8787/77)\n",
  );
  process.exit(2);
}
// `localhost:8787/77` (no scheme) would fail every tool call as an unreachable gateway, whose
// advice is to call again: refused at start instead, as the CLI refuses it.
if (!isHttpUrl(baseUrl)) {
  process.stderr.write(
    "agent-wallet mcp: AGENT_BASE_URL must be an http:// or https:// URL (e.g. http://127.0.0.1:8787/77)\n",
  );
  process.exit(2);
}
// fetch refuses to build a request from a URL with a user or password, which every tool call then
// answered as an unreachable gateway to call again: refused at start, the URL not repeated.
const { username, password } = new URL(baseUrl);
if (username !== "" || password !== "") {
  process.stderr.write(
    "agent-wallet mcp: AGENT_BASE_URL must not carry a user or password (fetch sends no request to such a URL; the token goes in AGENT_TOKEN)\n",
  );
  process.exit(2);
}
// A host that goes away (crashed, restarting) may stop reading before it closes our stdin: an
// answer then met a closed pipe (EPIPE) and ended the server with exit 1 and a stack trace in the
// host's log. Nobody can read an answer any more: it stops reading requests, as at stdin's end,
// and exits 0 once the calls under way have finished (their answers, and any log line, are lost).
ignoreUnreadOutput();
process.stdout.once("error", () => process.stdin.destroy());
// A host whose requests time out sooner than the official client's 60 s names its timeout, and every
// tool call answers inside it (host-timeout.ts).
const hostTimeout = parseHostTimeout(process.env.AGENT_MCP_HOST_TIMEOUT_SECONDS);
if ("refused" in hostTimeout) {
  process.stderr.write(`agent-wallet mcp: ${hostTimeout.refused}\n`);
  process.exit(2);
}
const server = createWalletMcpServer({ baseUrl, token }, "0.1.0", {
  hostTimeoutSeconds: hostTimeout.seconds,
});
const transport = new StdioServerTransport();
// The SDK's stdio transport closes for good at a message over its buffer's limit (10 MB: a tool
// argument that large), the only way it closes; the server then ended with exit 0 and nothing in
// the host's log, its tools gone without a word. It still stops reading, the rest of that line
// unframed, and now says why and exits 1 once the calls under way have finished.
transport.onclose = () => {
  process.stderr.write(
    "agent-wallet mcp: the host sent a message over the 10 MB the MCP SDK's stdio transport reads (a tool argument that large); the server reads no more requests and exits 1: restart it\n",
  );
  process.exitCode = 1;
};
await server.connect(transport);
