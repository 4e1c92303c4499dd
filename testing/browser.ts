/**
 * A real headless Chromium for page tests: the browser shipped inside the `@sparticuz/chromium`
 * npm package (no download step), driven by `playwright-core`.
 */
import chromium from "@sparticuz/chromium";
import { type Browser, chromium as playwright } from "playwright-core";

/**
 * The package's flags minus the two that would weaken what a page test checks: it turns web
 * security off and allows mixed content for its serverless use; the console's CSP and same-origin
 * rules must hold here as in an operator's browser. `--no-sandbox` stays: tests may run as root.
 */
const WEAKENING_FLAGS = new Set(["--disable-web-security", "--allow-running-insecure-content"]);

export async function launchBrowser(options: { extraArgs?: readonly string[] } = {}): Promise<Browser> {
  // No WebGL: the console draws nothing with it (its charts are SVG), and the package's software
  // GL for it (SwiftShader) cost Chromium about a sixth more CPU over the console's files.
  chromium.setGraphicsMode = false;
  return playwright.launch({
    executablePath: await chromium.executablePath(),
    args: [...chromium.args.filter((flag) => !WEAKENING_FLAGS.has(flag)), ...(options.extraArgs ?? [])],
    headless: true,
  });
}
