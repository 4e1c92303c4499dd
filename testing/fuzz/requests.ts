/**
 * Turns a route entry into fuzzed HTTP requests: its body (valid-ish, mutated or hostile), its
 * content type, its credentials (mostly right, so the fuzz reaches the route's validation; else
 * wrong, malformed or hostile), and the client-address and edge headers the origin parses.
 */
import fc from "fast-check";
import {
  HEADER_ADMIN_API_TOKEN,
  HEADER_CLIENT_IP,
  HEADER_EDGE_SECRET,
  HEADER_REGISTRATION,
  HEADER_REGISTRATION_ADMIN_TOKEN,
  HEADER_REGISTRATION_IP,
} from "../../shared/constants.ts";
import type { StackAgent } from "../money-stack.ts";
import type { FuzzSecrets } from "./fuzz-stack.ts";
import { type BodyBytes, forwardedFor, headerValue, hostileBody, ipLike, mutatedBody } from "./hostile.ts";
import type { Credentials, FuzzRoute } from "./routes.ts";
import { paymentHeaders } from "./x402-payments.ts";

export type FuzzRequest = {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: BodyBytes;
  /** null: no Content-Type header. */
  contentType?: string | null;
  /** A loopback source address: fuzzed refusals spread over many clients, so the per-IP tiers stay open. */
  localAddress: string;
};

export type RequestContext = { secrets: FuzzSecrets; agents: StackAgent[]; readOnly: StackAgent[] };

const often = <T>(right: fc.Arbitrary<T>, wrong: fc.Arbitrary<T>): fc.Arbitrary<T> =>
  fc.oneof({ weight: 4, arbitrary: right }, { weight: 1, arbitrary: wrong });

/** Same token id, another secret: the token of a real agent with the secret changed. */
const wrongSecret = (token: string): string => `${token.slice(0, -64)}${"0".repeat(63)}1`;

function bearerVariants(ctx: RequestContext): fc.Arbitrary<string | undefined> {
  const good = fc.constantFrom(...ctx.agents.map((agent) => agent.token));
  const token = fc.oneof(
    { weight: 3, arbitrary: good },
    { weight: 1, arbitrary: fc.constantFrom(...ctx.readOnly.map((agent) => agent.token)) },
  );
  const wrong = fc.oneof(
    good.map(wrongSecret),
    good.map((t) => t.toUpperCase()),
    good.map((t) => t.slice(0, -1)),
    good.map((t) => `${t}0`),
    fc.uint8Array({ minLength: 48, maxLength: 48 }).map((b) => {
      const hex = Buffer.from(b).toString("hex");
      return `agt_${hex.slice(0, 32)}_${hex.slice(32)}`;
    }),
    headerValue(120),
    fc.constantFrom(ctx.secrets.adminApiToken, ctx.secrets.edgeShared, "", "agt_", "agt__", "null"),
  );
  const scheme = fc.constantFrom(
    "Bearer ",
    "bearer ",
    "BEARER   ",
    "Bearer\t",
    "Basic ",
    "",
    "Bearer  Bearer ",
    "Token ",
  );
  return fc.oneof(
    { weight: 8, arbitrary: token.map((t) => `Bearer ${t}`) },
    { weight: 3, arbitrary: fc.tuple(scheme, fc.oneof(token, wrong)).map(([s, t]) => `${s}${t}`) },
    { weight: 1, arbitrary: fc.tuple(token, headerValue(20)).map(([t, tail]) => `Bearer ${t} ${tail}`) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

function secretVariants(right: string, others: string[]): fc.Arbitrary<string | undefined> {
  return often(
    fc.constant(right),
    fc.oneof(
      fc.constantFrom(...others, "", right.toUpperCase(), `${right} `, right.slice(1), `${right}${right}`),
      headerValue(80),
      fc.constant(undefined),
    ),
  );
}

const defined = (entries: Record<string, string | undefined>): Record<string, string> =>
  Object.fromEntries(
    Object.entries(entries).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );

function credentialHeaders(kind: Credentials, ctx: RequestContext): fc.Arbitrary<Record<string, string>> {
  const { secrets } = ctx;
  const all = Object.values(secrets);
  switch (kind) {
    case "agent":
      return bearerVariants(ctx).map((authorization) => defined({ authorization }));
    case "admin_read":
      return secretVariants(secrets.adminApiToken, all).map((token) =>
        defined({ [HEADER_ADMIN_API_TOKEN]: token }),
      );
    case "admin_change":
      return fc
        .tuple(secretVariants(secrets.adminApiToken, all), secretVariants(secrets.registrationAdmin, all))
        .map(([read, change]) =>
          defined({ [HEADER_ADMIN_API_TOKEN]: read, [HEADER_REGISTRATION_ADMIN_TOKEN]: change }),
        );
    case "metrics_scrape":
      return fc
        .tuple(secretVariants(secrets.adminApiToken, all), fc.boolean(), headerValue(10))
        .map(([token, asBearer, scheme]) =>
          asBearer
            ? defined({ authorization: token === undefined ? undefined : `${scheme || "Bearer"} ${token}` })
            : defined({ [HEADER_ADMIN_API_TOKEN]: token }),
        );
    case "registration":
      return fc
        .tuple(
          secretVariants(secrets.edgeShared, all),
          often(fc.oneof(fc.ipV4(), fc.ipV6()), ipLike),
          often(fc.constant("1"), fc.oneof(headerValue(5), fc.constant(undefined))),
        )
        .map(([edge, ip, flag]) =>
          defined({ [HEADER_EDGE_SECRET]: edge, [HEADER_REGISTRATION_IP]: ip, [HEADER_REGISTRATION]: flag }),
        );
    case "payment":
      return paymentHeaders.map((value) => defined({ "payment-signature": value }));
    case "none":
      return fc.constant({});
  }
}

/** The client-address and edge headers every route's middleware may parse. */
function addressHeaders(ctx: RequestContext): fc.Arbitrary<Record<string, string>> {
  return fc
    .record(
      {
        "x-forwarded-for": forwardedFor,
        [HEADER_CLIENT_IP]: ipLike,
        [HEADER_EDGE_SECRET]: secretVariants(ctx.secrets.edgeShared, [ctx.secrets.adminApiToken]).map(
          (v) => v ?? "",
        ),
        [HEADER_REGISTRATION_IP]: ipLike,
      },
      { requiredKeys: [] },
    )
    .map((headers) => defined(headers));
}

const contentTypes = fc.oneof(
  { weight: 12, arbitrary: fc.constant("application/json") },
  {
    weight: 2,
    arbitrary: fc.constantFrom<string | null>(
      null,
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/json; charset=utf-16",
      "APPLICATION/JSON",
      "application/json, text/html",
    ),
  },
  { weight: 1, arbitrary: headerValue(40) },
);

const loopbackSource = fc
  .tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 2, max: 254 }))
  .map(([a, b, c]) => `127.${a}.${b}.${c}`);

export function fuzzRequests(route: FuzzRoute, ctx: RequestContext): fc.Arbitrary<FuzzRequest> {
  const path = typeof route.path === "string" ? fc.constant(route.path) : route.path;
  const body: fc.Arbitrary<BodyBytes | undefined> = route.body
    ? fc.oneof(
        { weight: 5, arbitrary: mutatedBody(route.body.valid) },
        { weight: 2, arbitrary: hostileBody(route.body.maxBytes) },
      )
    : fc.oneof(
        { weight: 6, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: hostileBody(1_024) },
      );
  return fc
    .record({
      path,
      credentials: credentialHeaders(route.credentials, ctx),
      extra: fc.oneof(
        { weight: 3, arbitrary: fc.constant({}) },
        { weight: 1, arbitrary: addressHeaders(ctx) },
      ),
      body,
      contentType: contentTypes,
      localAddress: loopbackSource,
    })
    .map(({ path, credentials, extra, body, contentType, localAddress }) => ({
      method: route.method,
      path,
      // Credentials last, so a fuzzed edge secret does not replace registration's.
      headers: { ...extra, ...credentials },
      ...(body === undefined ? {} : { body, contentType }),
      localAddress,
    }));
}
