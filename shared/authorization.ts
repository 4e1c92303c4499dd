/**
 * The credentials of an `Authorization: Bearer …` header. RFC 9110 §11.1 makes the scheme
 * case-insensitive and separates it from its credentials by one or more spaces, so `bearer x`
 * and `BEARER  x` are the same presentation as `Bearer x`; any other scheme is no credentials.
 */
export function bearerCredentials(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^bearer +(\S+)$/i.exec(header);
  return match?.[1];
}
