import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { freePort } from "./free-port.ts";

describe("freePort", () => {
  it("picks loopback ports below the kernel's ephemeral range, free to listen on", async () => {
    // Outgoing connections take their local ports from 32768 up (Linux; macOS from 49152): a
    // port picked there may be taken before the server listens. The old picker (listen on 0)
    // answered from that range every time.
    for (let n = 0; n < 20; n++) {
      const port = await freePort();
      expect(port).toBeGreaterThanOrEqual(1_024);
      expect(port).toBeLessThan(32_768);
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", resolve);
      });
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
