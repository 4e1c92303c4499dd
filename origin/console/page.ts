import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { type Handler, Hono } from "hono";
import type { AppEnv } from "../http/env.ts";
import {
  CONSOLE_PAGE_SCRIPTS,
  CONSOLE_VENDOR_SCRIPTS,
  consoleAssetOperationId,
} from "../openapi/console-operations.ts";
import { route } from "../openapi/route.ts";

/**
 * The page's only sources: itself, its script and its stylesheet, all from this origin; no inline
 * script or style, no frame, no form submission (the forms are handled by the script), no base.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS: Record<string, string> = {
  "Content-Security-Policy": CONSOLE_CSP,
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Resource-Policy": "same-origin",
  "Cache-Control": "no-store",
};

const asset = (name: string): string => readFileSync(new URL(`./page/${name}`, import.meta.url), "utf8");

/**
 * A dependency's browser bundle, as its package publishes it. The package exports its entry only,
 * so the bundle is found beside the entry the resolver names (the installed version, whatever
 * node_modules layout holds it).
 */
const VENDOR: Record<(typeof CONSOLE_VENDOR_SCRIPTS)[number], { entry: string; bundle: string }> = {
  // script/index.js and dist/bundle/index.umd.min.js (UMD: it defines globalThis.SimpleWebAuthnBrowser).
  "simplewebauthn-browser.js": {
    entry: "@simplewebauthn/browser",
    bundle: "../dist/bundle/index.umd.min.js",
  },
};
const vendorAsset = (name: (typeof CONSOLE_VENDOR_SCRIPTS)[number]): string => {
  const { entry, bundle } = VENDOR[name];
  const resolved = createRequire(import.meta.url).resolve(entry);
  return readFileSync(path.join(path.dirname(resolved), bundle), "utf8");
};

/**
 * GET {base}/admin/agents (an HTML shell without operational data:
 * docs/operations.md#the-operator-console-and-metrics) and its scripts and stylesheet, served as
 * they are from origin/console/page/ and the dependencies' own bundles (no build step). The two
 * values put into the page come from the configuration: the API's base path, and the console's
 * origin (CONSOLE_ORIGIN), the only address its passkeys work at, which the page names when it is
 * opened at another (docs/operations.md#signing-in-with-a-passkey).
 */
export function createPageRouter(basePath: string, consoleOrigin: string): Hono<AppEnv> {
  const apiBase = `${basePath}/admin/agents`;
  const html = asset("console.html")
    .replaceAll("{{API_BASE}}", apiBase)
    // As the configuration derived it: one that does not parse (an IPv6 listener's) names no
    // address passkeys work at, and the page then says so at every address.
    .replaceAll("{{CONSOLE_ORIGIN}}", attributeText(consoleOrigin));
  const script = asset("console.js");
  const style = asset("console.css");
  const router = new Hono<AppEnv>();
  const serve =
    (body: string, type: string): Handler<AppEnv> =>
    (c) =>
      c.body(body, 200, { ...SECURITY_HEADERS, "Content-Type": type });
  route(router, "/", "consolePage", serve(html, "text/html; charset=utf-8"));
  route(router, "/", "consoleScript", serve(script, "text/javascript; charset=utf-8"));
  route(router, "/", "consoleStyle", serve(style, "text/css; charset=utf-8"));
  for (const name of CONSOLE_VENDOR_SCRIPTS) {
    route(
      router,
      "/",
      consoleAssetOperationId(name),
      serve(vendorAsset(name), "text/javascript; charset=utf-8"),
    );
  }
  for (const name of CONSOLE_PAGE_SCRIPTS) {
    route(router, "/", consoleAssetOperationId(name), serve(asset(name), "text/javascript; charset=utf-8"));
  }
  return router;
}

/** Text as an HTML attribute's value holds it. */
function attributeText(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll('"', "&quot;").replaceAll("<", "&lt;");
}
