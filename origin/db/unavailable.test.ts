import { describe, expect, it } from "vitest";
import { isDatabaseUnavailable } from "./unavailable.ts";

describe("isDatabaseUnavailable", () => {
  const withCode = (message: string, code: string): Error => Object.assign(new Error(message), { code });

  it("recognises a database that is gone, however deep drizzle wrapped the driver's error", () => {
    expect(isDatabaseUnavailable(withCode("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED"))).toBe(true);
    expect(isDatabaseUnavailable(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(
      isDatabaseUnavailable(withCode("terminating connection due to administrator command", "57P01")),
    ).toBe(true);
    expect(isDatabaseUnavailable(withCode("the database system is starting up", "57P03"))).toBe(true);
    const wrapped = new Error("Failed query: select 1", {
      cause: new Error("Client has encountered a connection error and is not queryable"),
    });
    expect(isDatabaseUnavailable(wrapped)).toBe(true);
  });

  it("leaves bugs and refused statements alone (they stay 500s, or whatever their route makes them)", () => {
    expect(isDatabaseUnavailable(withCode('relation "nope" does not exist', "42P01"))).toBe(false);
    expect(isDatabaseUnavailable(withCode("duplicate key value violates unique constraint", "23505"))).toBe(
      false,
    );
    expect(isDatabaseUnavailable(new TypeError("cannot read properties of undefined"))).toBe(false);
    expect(isDatabaseUnavailable("a string")).toBe(false);
  });
});
