// The AG-UI differential harness's driver: the official AG-UI client (@ag-ui/client's
// HttpAgent) makes the same runs against the reference (ag-ui-langgraph serving the concierge
// of tests/reference/agui_graphs.py) and against agentstate-server (the same concierge in Rust,
// tests/agui_reference.rs), and compares the events each run gives the client. Run by
// tests/agui_reference.rs as `node reference.mjs REFERENCE_URL OUR_URL` (each serving
// `/agui/concierge`); prints, per run of each scenario (`SCENARIO`, or `SCENARIO.RUN` for a
// scenario of several runs), `same NAME` or `differs NAME <the first difference>`.
//
// Normalized, because the values must differ and nothing else: ids (threads, runs, messages,
// tool calls, interrupts: each replaced by the order it first appears in, `<id N>`), timestamps,
// and what only LangGraph has (RAW events and `rawEvent` fields: LangGraph's own events passed
// through).
import { HttpAgent } from "@ag-ui/client";
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";

const [referenceUrl, ourUrl] = process.argv.slice(2);
const suffix = randomUUID();

/// The concierge of `base`, on thread `thread` (the same id on both servers), with `state`.
function agent(base, thread, state) {
  return new HttpAgent({
    url: `${base}/agui/concierge`,
    threadId: `${thread}-${suffix}`,
    initialState: state,
  });
}

/// A run of `agent` with `parameters`: the events it gives the client, whether it failed, and
/// the messages and state the client has after it.
async function run(agent, parameters = {}) {
  const events = [];
  let rejected = false;
  try {
    await agent.runAgent(parameters, { onEvent: ({ event }) => { events.push(event); } });
  } catch {
    rejected = true;
  }
  return { events, rejected, messages: agent.messages, state: agent.state };
}

/// The scenarios: each makes its runs on one server (`base`) and gives what they gave.
const scenarios = {
  // A model's answer, streamed; then a second turn on the thread.
  async text(base) {
    const chat = agent(base, "text");
    chat.addMessage({ id: "u1", role: "user", content: "hello" });
    const first = await run(chat, { runId: `text-1-${suffix}` });
    chat.addMessage({ id: "u2", role: "user", content: "again" });
    const second = await run(chat, { runId: `text-2-${suffix}` });
    return { first, second };
  },
  // A node that writes an assistant message (no model, nothing streamed).
  async assistant_message(base) {
    const chat = agent(base, "write");
    chat.addMessage({ id: "w1", role: "user", content: "write" });
    return run(chat, { runId: `write-${suffix}` });
  },
  // An interrupt, then its resume with the interrupted run's own runId (CopilotKit's
  // useInterrupt does so).
  async interrupt(base) {
    const chat = agent(base, "refund");
    chat.addMessage({ id: "r1", role: "user", content: "refund" });
    const runId = `refund-${suffix}`;
    const asked = await run(chat, { runId });
    const interruptId = chat.pendingInterrupts[0]?.id;
    const resumed = await run(chat, {
      runId,
      resume: [{ interruptId, status: "resolved", payload: true }],
    });
    return { asked, resumed };
  },
  // A client that connects to an interrupted thread afresh (a reload): a run without resume.
  async interrupted_reconnect(base) {
    const chat = agent(base, "asking");
    chat.addMessage({ id: "a1", role: "user", content: "refund" });
    await run(chat, { runId: `asking-1-${suffix}` });
    return run(agent(base, "asking"), { runId: `asking-2-${suffix}` });
  },
  // A frontend tool: the run ends with its call; the client answers it in the next run.
  async frontend_tool(base) {
    const tools = [{
      name: "confirm_order",
      description: "Asks the user to confirm an order",
      parameters: { type: "object", properties: { item: { type: "string" } } },
    }];
    const chat = agent(base, "order");
    chat.addMessage({ id: "o1", role: "user", content: "order" });
    const called = await run(chat, { runId: `order-1-${suffix}`, tools });
    const call = chat.messages.at(-1)?.toolCalls?.[0];
    chat.addMessage({ id: "o2", role: "tool", toolCallId: call?.id, content: "yes" });
    const answered = await run(chat, { runId: `order-2-${suffix}`, tools });
    return { called, answered };
  },
  // A node's custom event, then its answer.
  async custom_event(base) {
    const chat = agent(base, "progress");
    chat.addMessage({ id: "p1", role: "user", content: "progress" });
    return run(chat, { runId: `progress-${suffix}` });
  },
  // A backend tool: the model calls it, the graph's tool node runs it, the model answers.
  async backend_tool(base) {
    const chat = agent(base, "weather");
    chat.addMessage({ id: "t1", role: "user", content: "weather" });
    return run(chat, { runId: `weather-${suffix}` });
  },
  // A node that fails before it streams anything.
  async failing_node(base) {
    const chat = agent(base, "fail");
    chat.addMessage({ id: "f1", role: "user", content: "fail" });
    return run(chat, { runId: `fail-${suffix}` });
  },
  // A node that fails while its answer streams.
  async failing_stream(base) {
    const chat = agent(base, "break");
    chat.addMessage({ id: "b1", role: "user", content: "break" });
    return run(chat, { runId: `break-${suffix}` });
  },
  // The client's state, given with the run: the graph reads it.
  async client_state(base) {
    const chat = agent(base, "note", { note: "from the client", unknown: 1 });
    chat.addMessage({ id: "n1", role: "user", content: "note" });
    return run(chat, { runId: `note-${suffix}` });
  },
  // The user edits their message (same id, new text) and runs again: the conversation from
  // that message on is redone (CopilotKit's message editing).
  async edited_message(base) {
    const chat = agent(base, "edit");
    chat.addMessage({ id: "e1", role: "user", content: "hello" });
    await run(chat, { runId: `edit-1-${suffix}` });
    chat.setMessages([{ id: "e1", role: "user", content: "goodbye" }]);
    return run(chat, { runId: `edit-2-${suffix}` });
  },
  // An edited message on a thread that waits for an answer: the edit goes first.
  async edited_while_asked(base) {
    const chat = agent(base, "edit-asked");
    chat.addMessage({ id: "q1", role: "user", content: "refund" });
    await run(chat, { runId: `edit-asked-1-${suffix}` });
    const fresh = agent(base, "edit-asked");
    fresh.setMessages([{ id: "q1", role: "user", content: "never mind" }]);
    return run(fresh, { runId: `edit-asked-2-${suffix}` });
  },
  // The client's tools and context, as a CopilotKitState graph reads them.
  async client_tools(base) {
    const chat = agent(base, "actions", { copilotkit: { kept: true } });
    chat.addMessage({ id: "k1", role: "user", content: "actions" });
    return run(chat, {
      runId: `actions-${suffix}`,
      tools: [{ name: "pick_color", description: "Picks a color", parameters: { type: "object" } }],
      context: [{ description: "locale", value: "en-GB" }],
    });
  },
  // A new client on a thread with a conversation (a reload, a restarted CopilotKit runtime):
  // a run with no messages; the conversation comes back as MESSAGES_SNAPSHOT.
  async reconnect(base) {
    const chat = agent(base, "again");
    chat.addMessage({ id: "g1", role: "user", content: "hello" });
    await run(chat, { runId: `again-1-${suffix}` });
    return run(agent(base, "again"), { runId: `again-2-${suffix}` });
  },
};

/// `value` with ids, timestamps and LangGraph's own events normalized (see the top).
function normalize(value) {
  const ids = new Map();
  const idKey = (key) => key === "id" || key.endsWith("Id") || key.endsWith("_id");
  const collect = (v) => {
    if (Array.isArray(v)) return v.forEach(collect);
    if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (idKey(k) && typeof x === "string" && !ids.has(x)) ids.set(x, `<id ${ids.size + 1}>`);
        collect(x);
      }
    }
  };
  const strip = (v) => {
    if (Array.isArray(v)) {
      return v.filter((x) => !(x && x.type === "RAW")).map(strip);
    }
    if (v && typeof v === "object") {
      const out = {};
      for (const [k, x] of Object.entries(v)) {
        if (k === "rawEvent" || k === "timestamp" || x === undefined) continue;
        out[k] = strip(x);
      }
      return out;
    }
    return v;
  };
  const stripped = strip(value);
  collect(stripped);
  const replace = (v) => {
    if (Array.isArray(v)) return v.map(replace);
    if (v && typeof v === "object") {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, replace(x)]));
    }
    return typeof v === "string" && ids.has(v) ? ids.get(v) : v;
  };
  return replace(stripped);
}

/// The first place `a` and `b` differ, as a path and both values.
function firstDifference(a, b, path = "") {
  if (isDeepStrictEqual(a, b)) return null;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
  } else if (a && b && typeof a === "object" && typeof b === "object") {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], `${path}.${k}`);
      if (d) return d;
    }
  }
  return { path, reference: a, ours: b };
}

/// Takes out of `result`'s runs the payloads of the STATE_SNAPSHOTs sent after a node (those
/// not right before the run's MESSAGES_SNAPSHOT) into `into`, under `name`: they are compared
/// on their own, as the scenario `node_exit_state`, so that how each server shows the state
/// while a run goes on does not hide the rest of each scenario.
function takeNodeExitStates(name, result, into) {
  const visit = (v, path) => {
    if (Array.isArray(v?.events)) {
      v.events.forEach((event, i) => {
        if (event.type === "STATE_SNAPSHOT" && v.events[i + 1]?.type !== "MESSAGES_SNAPSHOT") {
          into[`${name}${path}[${i}]`] = event.snapshot;
          event.snapshot = "<compared in node_exit_state>";
        }
      });
    } else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) visit(x, `${path}.${k}`);
    }
  };
  visit(result, "");
  return result;
}

function report(name, reference, ours) {
  const difference = firstDifference(reference, ours);
  if (difference) {
    console.log(`differs ${name} ${JSON.stringify(difference)}`);
    if (process.env.AGUI_REFERENCE_VERBOSE) {
      console.log(JSON.stringify({ reference, ours }, null, 1));
    }
  } else {
    console.log(`same ${name}`);
  }
}

/// A scenario's runs by name: the scenario's name for its one run, `<scenario>.<run>` for each of
/// several; each is compared, and listed, on its own.
function runsOf(name, result) {
  if (Array.isArray(result.events)) return [[name, result]];
  return Object.entries(result).map(([run, value]) => [`${name}.${run}`, value]);
}

const nodeExit = { reference: {}, ours: {} };
for (const [name, scenario] of Object.entries(scenarios)) {
  const reference = takeNodeExitStates(name, normalize(await scenario(referenceUrl)), nodeExit.reference);
  const ours = takeNodeExitStates(name, normalize(await scenario(ourUrl)), nodeExit.ours);
  const theirs = Object.fromEntries(runsOf(name, reference));
  for (const [run, result] of runsOf(name, ours)) report(run, theirs[run], result);
}
report("node_exit_state", nodeExit.reference, nodeExit.ours);
