import net from "node:net";
import { startEdge } from "./dev/edge.ts";
import { startOriginStandIn } from "./edge-worker/testing/origin-stand-in.ts";

const origin = await startOriginStandIn((req, res) => { res.writeHead(200, {"content-type":"text/plain"}).end("ok " + req.method+ " " + req.url.slice(0,80)); });
const edge = await startEdge({ originUrl: origin.url, edgeSharedSecret: "s".repeat(64), onLine: (l) => console.log("[edge]", l.slice(0,300)), directSocket: true });
const port = new URL(edge.url).port;
const dport = edge.directUrl!.port;
function raw(p: string, text: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(Number(p), "127.0.0.1", () => s.write(text));
    let out = ""; s.on("data", (d) => (out += d)); s.on("close", () => resolve(out)); s.on("error", (e) => resolve("ERR " + e.message));
    setTimeout(() => s.destroy(), 3000);
  });
}
const long = "a".repeat(9000);
const reqs = [
 `TRACE /77/x402/demo?tok=agt_SECRET HTTP/1.1\r\nHost: x\r\ncf-connecting-ip: 203.0.113.9\r\nConnection: close\r\n\r\n`,
 `CONNECT /77/x402/demo HTTP/1.1\r\nHost: x\r\ncf-connecting-ip: 203.0.113.9\r\nConnection: close\r\n\r\n`,
 `FOO /77/x402/demo?tok=agt_SECRET HTTP/1.1\r\nHost: x\r\ncf-connecting-ip: 203.0.113.9\r\nConnection: close\r\n\r\n`,
 `PROPFIND /77/agent/v1/network HTTP/1.1\r\nHost: x\r\ncf-connecting-ip: 203.0.113.9\r\nConnection: close\r\n\r\n`,
 `GET /77/x402/demo?q=${long} HTTP/1.1\r\nHost: x\r\ncf-connecting-ip: 203.0.113.9\r\nConnection: close\r\n\r\n`,
 `GET /77/agent/v1/network?q=${long} HTTP/1.1\r\nHost: x\r\ncf-connecting-ip: 203.0.113.9\r\nAuthorization: Bearer agt_SECRETTOKEN\r\nConnection: close\r\n\r\n`,
 `HEAD /77/x402/demo HTTP/1.1\r\nHost: x\r\ncf-connecting-ip: 203.0.113.9\r\nConnection: close\r\n\r\n`,
];
for (const r of reqs) for (const [name, p] of [["front", port], ["direct", dport]] as const) {
  origin.received.length = 0;
  const out = await raw(p, r);
  console.log(name, r.split(" ")[0], "=>", out.split("\r\n")[0], out.split("\r\n\r\n")[1]?.slice(0,200), "| origin saw:", JSON.stringify(origin.received.map((x) => [x.method, x.url.slice(0,60)])));
}
await edge.stop(); await origin.close();
