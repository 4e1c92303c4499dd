/**
 * Whether `value` holds a C0 control character or DEL, but those in `allowed` (e.g. "\t\n"): text
 * meant for people or for a search holds none, and Postgres text cannot hold NUL at all (a query
 * given one fails rather than matches nothing).
 */
export function hasControlCharacter(value: string, allowed = ""): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 || code === 0x7f) && !allowed.includes(value[i]!)) return true;
  }
  return false;
}
