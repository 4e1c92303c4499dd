import { BlockList, isIP } from "node:net";
import { err, ok, type Result } from "../../shared/result.ts";

/** A parsed AGENT_TRUSTED_PROXIES list: the source text (for /network and logs) and a matcher. */
export type CidrSet = { readonly entries: readonly string[]; contains(ip: string): boolean };

export type ParseCidrResult = Result<CidrSet, string>;

/**
 * Parses a comma-separated list of IPv4/IPv6 CIDRs (a bare address means /32 or /128).
 * Backed by node's BlockList, which matches both families and IPv4-mapped IPv6 forms.
 */
export function parseCidrList(text: string): ParseCidrResult {
  const list = new BlockList();
  const entries: string[] = [];
  for (const raw of text.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const [host = "", prefixText, extra] = entry.split("/");
    const family = isIP(host);
    if (family === 0 || extra !== undefined) return err(`bad entry #${entries.length + 1}`);
    const max = family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? max : Number(prefixText);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || (prefixText ?? "0").trim() === "") {
      return err(`bad prefix in entry #${entries.length + 1}`);
    }
    list.addSubnet(host, prefix, family === 4 ? "ipv4" : "ipv6");
    entries.push(`${host}/${prefix}`);
  }
  return ok({
    entries,
    contains(ip: string): boolean {
      const family = isIP(ip);
      if (family === 0 || entries.length === 0) return false;
      return list.check(ip, family === 4 ? "ipv4" : "ipv6");
    },
  });
}
