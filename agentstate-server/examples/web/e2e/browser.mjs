// What the page scripts share: headless Chromium (Debian's /usr/bin/chromium, or
// AGENTSTATE_CHROMIUM) driven by playwright-core, with nothing fetched from the network, and
// checks that print `ok <name>` or `fail <name>: <why>` (with a screenshot) and go on.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/// A fresh browser (its own profile, removed by `close`), with one page 1000x720.
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "agentstate-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.AGENTSTATE_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1000, height: 720 },
    // No background connections: the network is closed, and they would pile up.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20_000);
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  return {
    page,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/// Runs one check: `ok name` if `body` resolves, else `fail name: why` and a screenshot
/// `fail-<name>.png` in `shots`; never throws.
export function checker(page, shots) {
  return async (name, body) => {
    try {
      await body();
      console.log(`ok ${name}`);
      return true;
    } catch (error) {
      console.log(`fail ${name}: ${String(error?.message ?? error).split("\n")[0]}`);
      await page.screenshot({ path: join(shots, `fail-${name}.png`) }).catch(() => {});
      return false;
    }
  };
}

/// Throws `what` unless `condition`.
export function expect(condition, what) {
  if (!condition) throw new Error(what);
}
