/**
 * A public registration sent straight to an origin as the edge forwards it (docs/api.md): the
 * registration marker, the edge's shared secret and the client's address, which only the edge may
 * name. Tests of the origin's registration act as the edge with it, the client's address their own.
 */
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../shared/constants.ts";
import { send, type TestResponse } from "./http.ts";

export function registerAsEdge(base: string, edgeSecret: string, clientIp: string): Promise<TestResponse> {
  return send(`${base}/agent/v1/register`, {
    method: "POST",
    headers: {
      [HEADER_REGISTRATION]: "1",
      [HEADER_EDGE_SECRET]: edgeSecret,
      [HEADER_REGISTRATION_IP]: clientIp,
    },
    body: "{}",
  });
}
