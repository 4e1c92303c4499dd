import { describe, expect, it } from "vitest";
import { figureBeside } from "./goal-figure.ts";

describe("figureBeside", () => {
  it("keeps the usual decimals when they leave the figure on its own side of the bound", () => {
    expect(figureBeside(0.8712, 0.9)).toBe("0.87");
    expect(figureBeside(3.0412, 3)).toBe("3.04");
    expect(figureBeside(0.35, 0.35)).toBe("0.35");
    expect(figureBeside(541.26, 300, 0)).toBe("541");
  });

  it("adds decimals until a figure that misses its bound no longer reads as the bound", () => {
    expect(figureBeside(0.8996, 0.9)).toBe("0.8996");
    expect(figureBeside(0.3504, 0.35)).toBe("0.3504");
    expect(figureBeside(84.6, 85, 0)).toBe("84.6");
  });

  it("adds decimals until a figure does not read past its bound on the wrong side", () => {
    // 0.8984 would print 0.90, above a bound of 0.899 it is below.
    expect(figureBeside(0.8984, 0.899)).toBe("0.898");
    // 1.0496 would print 1.05, on a bound it is inside of.
    expect(figureBeside(1.0496, 1.05)).toBe("1.0496");
  });
});
