import { request } from "node:http";

export type TestResponse = {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
};

export type SendParams = {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Source address on the loopback range (127.0.0.0/8), to act as distinct clients. */
  localAddress?: string;
};

/** A minimal HTTP client that can choose its source address, which fetch cannot. */
export function send(url: string, params: SendParams = {}): Promise<TestResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: params.method ?? "GET",
        headers: {
          ...(params.body === undefined ? {} : { "content-type": "application/json" }),
          ...params.headers,
        },
        localAddress: params.localAddress,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      },
    );
    req.on("error", reject);
    req.end(params.body);
  });
}
