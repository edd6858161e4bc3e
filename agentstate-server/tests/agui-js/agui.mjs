// The official AG-UI client (@ag-ui/client's HttpAgent) against agentstate-server's AG-UI
// endpoint; run by tests/agui.rs with the server's URL and the client's package: `@ag-ui/client`
// (1.0.0) or `ag-ui-client-copilotkit` (@ag-ui/client 0.0.59, the one CopilotKit's runtime
// bundles). Prints `ok <check>` per check passed; any failure (the client's event verifier
// included) throws.
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";

const [base, clientPackage = "@ag-ui/client"] = process.argv.slice(2);
const { HttpAgent } = await import(clientPackage);
const url = `${base}/agui/concierge`;

function ok(name, passed, detail) {
  if (!passed) throw new Error(`check ${name} failed: ${JSON.stringify(detail, null, 1)}`);
  console.log(`ok ${name}`);
}

async function thread(id) {
  return (await fetch(`${base}/threads/${id}`)).json();
}

async function serverValues(id) {
  return (await (await fetch(`${base}/threads/${id}/state`)).json()).values;
}

async function sameState(name, agent) {
  const values = await serverValues(agent.threadId);
  ok(name, isDeepStrictEqual(agent.state, values), { client: agent.state, server: values });
}

function post(body) {
  return fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

// Text, streamed.
const chat = new HttpAgent({ url, threadId: `agui-text-${randomUUID()}` });
chat.addMessage({ id: "u1", role: "user", content: "hello" });
const types = [];
const deltas = [];
await chat.runAgent({}, {
  onEvent: ({ event }) => { types.push(event.type); },
  onTextMessageContentEvent: ({ event }) => { deltas.push(event.delta); },
});
ok("run_started_first", types[0] === "RUN_STARTED", types);
ok("one_run_finished_last",
  types.at(-1) === "RUN_FINISHED" && types.filter((t) => t.startsWith("RUN_")).length === 2, types);
ok("text_streamed", deltas.length > 1 && deltas.join("") === "You said: hello", deltas);
const answer = chat.messages.at(-1);
ok("text_message", chat.messages.length === 2 && answer.role === "assistant"
  && answer.content === "You said: hello", chat.messages);
await sameState("state_equals_server", chat);

// A second turn: the client sends the whole conversation, the thread takes the new message.
chat.addMessage({ id: "u2", role: "user", content: "again" });
await chat.runAgent();
const values = await serverValues(chat.threadId);
ok("second_turn_adds_only_new_messages", values.messages.length === 4 && chat.messages.length === 4
  && chat.messages.at(-1).content === "You said: again", { values, client: chat.messages });
await sameState("second_turn_state_equals_server", chat);

// An interrupt, and its resume.
const refund = new HttpAgent({ url, threadId: `agui-refund-${randomUUID()}` });
refund.addMessage({ id: "r1", role: "user", content: "refund" });
let finished;
await refund.runAgent({}, { onRunFinishedEvent: (params) => { finished = params; } });
ok("interrupt_outcome", finished.outcome === "interrupt" && finished.interrupts.length === 1
  && finished.interrupts[0].message === "Refund 30 EUR?", finished);
ok("interrupt_pending", refund.pendingInterrupts.length === 1
  && refund.pendingInterrupts[0].id === finished.interrupts[0].id, refund.pendingInterrupts);
const asked = await thread(refund.threadId);
ok("thread_interrupted", asked.status === "interrupted", asked);
const interruptId = finished.interrupts[0].id;
await refund.runAgent(
  { resume: [{ interruptId, status: "resolved", payload: true }] },
  { onRunFinishedEvent: (params) => { finished = params; } },
);
ok("resume_finished", finished.outcome === "success" && refund.pendingInterrupts.length === 0, finished);
ok("resume_answer", refund.messages.at(-1).content === "Refunded." && refund.state.approved === true,
  { messages: refund.messages, state: refund.state });
await sameState("resume_state_equals_server", refund);

// A frontend tool: the run ends with its call pending; the client answers it in the next run.
const tools = [{
  name: "confirm_order",
  description: "Asks the user to confirm an order",
  parameters: { type: "object", properties: { item: { type: "string" } } },
}];
const order = new HttpAgent({ url, threadId: `agui-tool-${randomUUID()}` });
order.addMessage({ id: "o1", role: "user", content: "order" });
const args = [];
await order.runAgent({ tools }, {
  onRunFinishedEvent: (params) => { finished = params; },
  onToolCallArgsEvent: ({ event }) => { args.push(event.delta); },
});
// 1.0 names the calls left pending; 0.0.59 does not: they are those without a result.
const answered = new Set(order.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
const pending = clientPackage === "@ag-ui/client"
  ? finished.pendingToolCallIds
  : order.messages.flatMap((m) => m.toolCalls ?? []).map((c) => c.id).filter((id) => !answered.has(id));
ok("frontend_tool_pending", finished.outcome === "success" && pending?.length === 1, finished);
ok("frontend_tool_args_streamed", args.length === 2 && args.join("") === `{"item": "book"}`, args);
const call = order.messages.at(-1).toolCalls?.[0];
ok("frontend_tool_call", call?.id === pending[0]
  && call.function.name === "confirm_order" && JSON.parse(call.function.arguments).item === "book",
  order.messages);
order.addMessage({ id: "o2", role: "tool", toolCallId: call.id, content: "yes" });
await order.runAgent({ tools });
ok("frontend_tool_answered", order.messages.at(-1).content === "The user chose: yes", order.messages);
await sameState("frontend_tool_state_equals_server", order);

// One run per thread: a second run on a busy thread is refused before its stream starts.
const slow = new HttpAgent({ url, threadId: `agui-busy-${randomUUID()}` });
slow.addMessage({ id: "s1", role: "user", content: "slow down" });
const running = slow.runAgent();
await new Promise((resolve) => setTimeout(resolve, 500));
const refused = await post({ threadId: slow.threadId, runId: randomUUID(), messages: [], tools: [], context: [] });
const busy = await refused.json();
ok("busy_thread_refused", refused.status === 409 && busy.detail.includes("is busy with run"), busy);
await running;

const malformed = await post(`{"threadId": 7}`);
const why = await malformed.json();
ok("malformed_body_refused", malformed.status === 422 && why.detail.includes("is not a RunAgentInput"), why);

const unknown = await post({
  threadId: slow.threadId, runId: randomUUID(), messages: [], tools: [], context: [],
  resume: [{ interruptId: "nobody:asked", status: "resolved", payload: 1 }],
});
const which = await unknown.json();
ok("unknown_interrupt_refused", unknown.status === 422 && which.detail.includes("`nobody:asked`"), which);

// A failed run ends with RUN_ERROR: its code the error's category, its message naming the run.
const failing = new HttpAgent({ url, threadId: `agui-fail-${randomUUID()}` });
failing.addMessage({ id: "f1", role: "user", content: "fail" });
const failedRun = randomUUID();
let runError;
const failure = await failing
  .runAgent({ runId: failedRun }, { onRunErrorEvent: ({ event }) => { runError = event; } })
  .then(() => null, (error) => error);
ok("run_error", runError?.code === "node_exception" && runError.message.includes(failedRun)
  && runError.message.includes("cannot answer"), { runError, failure: String(failure) });

// A run cancelled through the LangGraph API (the AG-UI run's id is the client's runId).
const stopped = new HttpAgent({ url, threadId: `agui-cancel-${randomUUID()}` });
stopped.addMessage({ id: "c1", role: "user", content: "slow, then stop" });
const stoppedRun = randomUUID();
let cancelError;
const going = stopped
  .runAgent({ runId: stoppedRun }, { onRunErrorEvent: ({ event }) => { cancelError = event; } })
  .catch((error) => error);
await new Promise((resolve) => setTimeout(resolve, 500));
const cancel = await fetch(`${base}/threads/${stopped.threadId}/runs/${stoppedRun}/cancel?wait=1`,
  { method: "POST" });
await going;
ok("cancelled_run_error", cancel.status === 200 && cancelError?.code === "run_cancelled", {
  status: cancel.status, cancelError,
});
