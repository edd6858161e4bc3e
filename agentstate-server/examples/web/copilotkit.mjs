// CopilotKit's runtime (@copilotkit/runtime 1.75.0, its v2 fetch handler) and the CopilotKit
// page (dist/copilot.html, built by `npm run build`) on one origin, in node: the runtime's agent
// `concierge` is an `HttpAgent` on agentstate-server's AG-UI endpoint.
//
//   node copilotkit.mjs http://127.0.0.1:2024 [port]
//
// (the `chat` example's server first: `cargo run -p agentstate-server --example chat`). Listens
// on 127.0.0.1 (port 3000 by default, 0: a free one) and prints the page's URL. CopilotKit's
// telemetry is off (COPILOTKIT_TELEMETRY_DISABLED), so nothing leaves the machine.
process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";

import { CopilotRuntime, InMemoryAgentRunner, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";
import { HttpAgent } from "@ag-ui/client";
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { Readable } from "node:stream";
import { basename, dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [server = "http://127.0.0.1:2024", port = "3000"] = process.argv.slice(2);
const dist = join(dirname(fileURLToPath(import.meta.url)), "dist");
const runtime = new CopilotRuntime({
  agents: { concierge: new HttpAgent({ url: `${server}/agui/concierge` }) },
  runner: new InMemoryAgentRunner(),
});
const handler = createCopilotRuntimeHandler({ runtime, basePath: "/api/copilotkit" });
const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8" };

/// A file of the bundle (the page at `/`, its files under `/assets/`).
async function file(path, res) {
  try {
    const body = await readFile(path);
    res.writeHead(200, { "Content-Type": types[extname(path)] ?? "application/octet-stream" });
    res.end(body);
  } catch {
    res.writeHead(404, { "Content-Type": "text/plain" });
    res.end(`${path} is not built: run \`npm ci && npm run build\` in ${dirname(dist)}`);
  }
}

const http = createServer(async (req, res) => {
  const url = new URL(req.url, `http://${req.headers.host}`);
  if (req.method === "GET" && url.pathname === "/") return file(join(dist, "copilot.html"), res);
  if (req.method === "GET" && url.pathname.startsWith("/assets/")) {
    return file(join(dist, "assets", basename(url.pathname)), res);
  }
  if (!url.pathname.startsWith("/api/copilotkit")) {
    res.writeHead(404).end();
    return;
  }
  // The runtime is a fetch handler: node's request as a Request, its Response streamed back.
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  const request = new Request(url, {
    method: req.method,
    headers: Object.entries(req.headers).filter(([, v]) => typeof v === "string"),
    body: hasBody ? Readable.toWeb(req) : undefined,
    duplex: hasBody ? "half" : undefined,
  });
  try {
    const response = await handler(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return res.end();
    for await (const chunk of response.body) res.write(chunk);
    res.end();
  } catch (error) {
    console.error(error);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});
http.listen(Number(port), "127.0.0.1", () => {
  console.log(`CopilotKit's chat on agentstate-server (${server}): http://127.0.0.1:${http.address().port}`);
});
