// Records the raw SSE bodies of agentstate-server's AG-UI endpoint (text, an interrupt, its
// resume, a frontend tool call, a failure) into the directory given, for ag-ui-validate; run by
// tests/agui.rs. Needs no package: plain fetch.
import { writeFileSync } from "node:fs";
import { randomUUID } from "node:crypto";

const [base, dir] = process.argv.slice(2);

async function record(name, input) {
  const response = await fetch(`${base}/agui/concierge`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({ runId: randomUUID(), tools: [], context: [], forwardedProps: {}, ...input }),
  });
  const body = await response.text();
  if (response.status !== 200) throw new Error(`${name}: ${response.status} ${body}`);
  writeFileSync(`${dir}/${name}.sse`, body);
  console.log(`recorded ${name}`);
  return body.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
}

const user = (id, content) => ({ id, role: "user", content });
await record("text", { threadId: `rec-text-${randomUUID()}`, messages: [user("u1", "hello")] });

const threadId = `rec-refund-${randomUUID()}`;
const asked = await record("interrupt", { threadId, messages: [user("r1", "refund")] });
const interruptId = asked.at(-1).outcome.interrupts[0].id;
await record("resume", {
  threadId, messages: [user("r1", "refund")],
  resume: [{ interruptId, status: "resolved", payload: false }],
});

await record("frontend_tool", {
  threadId: `rec-tool-${randomUUID()}`,
  messages: [user("o1", "order")],
  tools: [{ name: "confirm_order", description: "Asks the user to confirm an order", parameters: { type: "object" } }],
});

await record("failed", { threadId: `rec-fail-${randomUUID()}`, messages: [user("f1", "fail")] });
