// CopilotKit's runtime (@copilotkit/runtime 1.75.0, its v2 fetch handler, as a Next.js or
// Express route mounts it) with agentstate-server's AG-UI endpoint as one of its agents, an
// `HttpAgent` of the @ag-ui/client the runtime bundles (0.0.59); run by tests/agui.rs with the
// server's URL. Requests go to the runtime as a browser's CopilotKit client sends them
// (`POST {base}/agent/{id}/run` with a RunAgentInput); prints `ok <check>` per check passed, and
// any failure throws.
import { CopilotRuntime, InMemoryAgentRunner, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";
import { HttpAgent } from "ag-ui-client-copilotkit";
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";

const [server] = process.argv.slice(2);
const base = "http://localhost/api/copilotkit";
const runtime = new CopilotRuntime({
  agents: { concierge: new HttpAgent({ url: `${server}/agui/concierge` }) },
  runner: new InMemoryAgentRunner(),
});
const handler = createCopilotRuntimeHandler({ runtime, basePath: "/api/copilotkit", activateChannels: false });

function ok(name, passed, detail) {
  if (!passed) throw new Error(`check ${name} failed: ${JSON.stringify(detail, null, 1)}`);
  console.log(`ok ${name}`);
}

/// A run through the runtime: its AG-UI events, as the runtime streams them to the browser.
async function run(input) {
  const response = await handler(new Request(`${base}/agent/concierge/run`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({ runId: randomUUID(), state: {}, tools: [], context: [], forwardedProps: {}, ...input }),
  }));
  if (response.status !== 200) throw new Error(`the runtime answered ${response.status}: ${await response.text()}`);
  return (await response.text())
    .split("\n\n")
    .map((frame) => frame.split("\n").find((line) => line.startsWith("data:")))
    .filter(Boolean)
    .map((line) => JSON.parse(line.slice(5)));
}

async function serverState(thread) {
  return (await (await fetch(`${server}/threads/${thread}/state`)).json()).values;
}

const info = await (await handler(new Request(`${base}/info`))).json();
ok("runtime_lists_the_agent", info.agents?.concierge?.name === "concierge", info);

// A streamed answer.
const chat = `copilotkit-${randomUUID()}`;
const hello = [{ id: "u1", role: "user", content: "hello" }];
let events = await run({ threadId: chat, messages: hello });
const types = events.map((e) => e.type);
ok("runtime_run_started_first", types[0] === "RUN_STARTED", types);
ok("runtime_one_run_finished_last",
  types.at(-1) === "RUN_FINISHED" && types.filter((t) => t.startsWith("RUN_")).length === 2, types);
const text = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
ok("runtime_text_streamed", text === "You said: hello", events);
let values = await serverState(chat);
ok("runtime_run_on_the_thread", values.messages.length === 2 && values.messages[1].content === "You said: hello", values);
const snapshot = events.findLast((e) => e.type === "STATE_SNAPSHOT");
ok("runtime_state_snapshot", snapshot && isDeepStrictEqual(Object.keys(snapshot.snapshot).sort(), Object.keys(values).sort()), snapshot);

// An interrupt through the runtime, and its resume.
const refund = `copilotkit-refund-${randomUUID()}`;
const asking = [{ id: "r1", role: "user", content: "refund" }];
// CopilotKit's `useInterrupt` resumes with the interrupted run's own runId.
const askingRun = randomUUID();
events = await run({ threadId: refund, runId: askingRun, messages: asking });
const asked = events.at(-1);
ok("runtime_interrupt_outcome", asked.type === "RUN_FINISHED" && asked.outcome?.type === "interrupt"
  && asked.outcome.interrupts.length === 1, asked);
const interruptId = asked.outcome.interrupts[0].id;
events = await run({ threadId: refund, runId: askingRun, messages: asking,
  resume: [{ interruptId, status: "resolved", payload: true }] });
const done = events.at(-1);
values = await serverState(refund);
// A plain success has no outcome (ag-ui-langgraph's RUN_FINISHED).
ok("runtime_resume", done.type === "RUN_FINISHED" && done.outcome === undefined
  && values.approved === true && values.messages.at(-1).content === "Refunded.", { done, values });

// A frontend tool the browser declares: the run ends with its call for the browser to run.
const tools = [{ name: "confirm_order", description: "Asks the user to confirm an order",
  parameters: { type: "object", properties: { item: { type: "string" } } } }];
const order = `copilotkit-tool-${randomUUID()}`;
events = await run({ threadId: order, messages: [{ id: "o1", role: "user", content: "order" }], tools });
const start = events.find((e) => e.type === "TOOL_CALL_START");
ok("runtime_frontend_tool", start?.toolCallName === "confirm_order" && events.at(-1).type === "RUN_FINISHED"
  && !events.some((e) => e.type === "TOOL_CALL_RESULT"), events.map((e) => e.type));

// A failing run reaches the browser as RUN_ERROR.
events = await run({ threadId: `copilotkit-fail-${randomUUID()}`, messages: [{ id: "f1", role: "user", content: "fail" }] });
ok("runtime_run_error", events.at(-1).type === "RUN_ERROR" && events.at(-1).message.includes("fail"), events.at(-1));

// The runtime restarted (a new one, its runner's memory empty): a run with no new messages on
// the earlier chat's thread gives the browser the thread's conversation (MESSAGES_SNAPSHOT).
const restarted = createCopilotRuntimeHandler({
  runtime: new CopilotRuntime({
    agents: { concierge: new HttpAgent({ url: `${server}/agui/concierge` }) },
    runner: new InMemoryAgentRunner(),
  }),
  basePath: "/api/copilotkit",
  activateChannels: false,
});
const reloaded = await restarted(new Request(`${base}/agent/concierge/run`, {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
  body: JSON.stringify({ threadId: chat, runId: randomUUID(), state: {}, messages: [], tools: [], context: [], forwardedProps: {} }),
}));
const replayed = (await reloaded.text()).split("\n\n")
  .map((frame) => frame.split("\n").find((line) => line.startsWith("data:")))
  .filter(Boolean)
  .map((line) => JSON.parse(line.slice(5)));
const conversation = replayed.findLast((e) => e.type === "MESSAGES_SNAPSHOT")?.messages ?? [];
ok("runtime_restart_reads_the_thread", reloaded.status === 200 && conversation[0]?.id === "u1"
  && conversation[1]?.content === "You said: hello", replayed);
