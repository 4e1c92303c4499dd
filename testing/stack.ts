/**
 * File-scoped fixtures: one call at the top of a describe block starts a part in beforeAll, stops
 * it in afterAll, and hands back the part itself. The handle forwards to the part once beforeAll
 * has run, so the file's tests read `stack.origin.base` as if they held the stack.
 */
import { afterAll, beforeAll } from "vitest";
import { type Devnet, startDevnet } from "../devnet/index.ts";
import { type MoneyStack, type MoneyStackOptions, startMoneyStack } from "./money-stack.ts";
import { type StartTestOriginParams, startTestOrigin, type TestOrigin } from "./origin.ts";

export type FixtureOptions = {
  /** How long the start may take; vitest's hookTimeout by default. */
  timeoutMs?: number;
};

/**
 * A whole money stack (money-stack.ts) for the describe block it is called in. `options` may be a
 * function, for options built from values the file makes at collection time or in an earlier hook.
 * Hooks registered after this call run after the stack started and before it closes.
 */
export function useMoneyStack(
  options: MoneyStackOptions | (() => MoneyStackOptions) = {},
  fixture: FixtureOptions = {},
): MoneyStack {
  return useFixture(
    "money stack",
    () => startMoneyStack(typeof options === "function" ? options() : options),
    (stack) => stack.close(),
    fixture,
  );
}

/** A devnet alone on a free port, for the files that test chain code without a whole stack. */
export function useDevnet(fixture: FixtureOptions = {}): Devnet {
  return useFixture(
    "devnet",
    () => startDevnet({ port: 0 }),
    (devnet) => devnet.close(),
    fixture,
  );
}

/**
 * Another origin on a money stack's database, devnet and environment, for the describe block it is
 * called in. `options` is read when the origin starts (after the hooks registered before this
 * call): `env` is added to the stack's origin environment, the rest goes to startTestOrigin.
 */
export function useStackOrigin(
  name: string,
  stack: MoneyStack,
  options: () => Omit<Partial<StartTestOriginParams>, "database" | "rpcUrl"> = () => ({}),
  fixture: FixtureOptions = {},
): TestOrigin {
  return useFixture(
    name,
    () => {
      const { env, ...rest } = options();
      return startTestOrigin({
        ...rest,
        database: stack.db.handle,
        rpcUrl: stack.devnet.url,
        env: { ...stack.originEnv, ...env },
      });
    },
    (origin) => origin.close(),
    fixture,
  );
}

/** Starts a part in beforeAll and stops it in afterAll; the handle forwards to the part. */
export function useFixture<T extends object>(
  name: string,
  start: () => Promise<T>,
  stop: (part: T) => Promise<unknown>,
  fixture: FixtureOptions = {},
): T {
  let part: T | undefined;
  beforeAll(async () => {
    part = await start();
  }, fixture.timeoutMs);
  afterAll(async () => {
    if (part) await stop(part);
  });
  return new Proxy({} as T, {
    get(_target, property) {
      if (!part) throw new Error(`the ${name} is used before its beforeAll started it (or after it failed)`);
      const value = Reflect.get(part, property, part);
      return typeof value === "function" ? value.bind(part) : value;
    },
    has: (_target, property) => part !== undefined && Reflect.has(part, property),
  });
}
