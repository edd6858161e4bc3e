// Bundles the two pages with esbuild into dist/: chat.html and copilot.html, and under assets/
// their scripts (React and the clients bundled in, minified) and styles.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

mkdirSync("dist/assets", { recursive: true });
await esbuild.build({
  // Each page's script imports its style sheet: esbuild writes it beside the script.
  entryPoints: ["src/chat.jsx", "src/copilot.jsx"],
  outdir: "dist/assets",
  entryNames: "[name]",
  bundle: true,
  format: "esm",
  jsx: "automatic",
  minify: true,
  sourcemap: false,
  target: ["chrome120", "firefox120", "safari17"],
  define: { "process.env.NODE_ENV": '"production"' },
  loader: { ".woff": "file", ".woff2": "file", ".ttf": "file", ".svg": "file", ".png": "file" },
  logLevel: "warning",
});
for (const page of ["chat.html", "copilot.html"]) copyFileSync(page, `dist/${page}`);
console.log("built dist/chat.html, dist/copilot.html and dist/assets/");
