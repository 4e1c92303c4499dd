/**
 * A bench's figure printed beside its goal's verdict. Rounded to a few decimals, a figure that just
 * misses its bound can read as the bound itself, or as past it: 0.8996× printed "0.90" beside
 * "≥ 0.9×: not met". These print the figure with as many more decimals as it takes to fall on the
 * same side of the bound as the value it stands for.
 */

/** `value` with `digits` decimals, or more when fewer would put it on the other side of `bound`. */
export function figureBeside(value: number, bound: number, digits = 2): string {
  const side = Math.sign(value - bound);
  let text = value.toFixed(digits);
  // Up to 20 decimals is what toFixed takes; a value that still rounds onto the bound there is it.
  for (let more = digits + 1; Math.sign(Number(text) - bound) !== side && more <= 20; more++) {
    text = value.toFixed(more);
  }
  return text;
}
