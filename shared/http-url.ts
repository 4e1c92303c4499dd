/**
 * Whether `value` is an absolute http: or https: URL. The URL parser alone takes any scheme, so
 * `localhost:8787/77` (a scheme `localhost:`) would pass and every request to it fail later as an
 * unreachable host, naming nothing.
 */
export function isHttpUrl(value: string): boolean {
  return URL.canParse(value) && /^https?:$/.test(new URL(value).protocol);
}
