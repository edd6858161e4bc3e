// The official LangGraph JS SDK against an agentstate-server serving the help desk graph
// (examples/support/desk.rs) at the URL given as the first argument, with API key `test-key`.
// Prints `ok <check>` per check passed; the first failure throws (exit code 1). Run by
// tests/js_sdk.rs, which compares the printed checks with its list.
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.argv[2];
const client = new Client({ apiUrl, apiKey: "test-key", defaultHeaders: {} });

function check(name, ok, detail) {
  if (!ok) {
    throw new Error(`check \`${name}\` failed: ${JSON.stringify(detail, null, 1)}`);
  }
  console.log(`ok ${name}`);
}

async function refused(promise) {
  try {
    await promise;
    return "no error";
  } catch (error) {
    return String(error.message ?? error);
  }
}

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

// Messages as `useStream` sends them: LangChain's dicts.
const ask = (text) => ({ messages: [{ type: "human", content: text }] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The API key.
const keyless = new Client({ apiUrl, apiKey: null, defaultHeaders: {} });
const noKey = await refused(keyless.assistants.search({}));
check("api_key_required", noKey.includes("401") && noKey.includes("x-api-key"), noKey);

// Assistants.
const assistants = await client.assistants.search({ graphId: "desk" });
check("assistants_search", assistants.length === 1 && assistants[0].graph_id === "desk", assistants);
const assistant = await client.assistants.get(assistants[0].assistant_id);
check("assistants_get", assistant.graph_id === "desk", assistant);
const graph = await client.assistants.getGraph(assistant.assistant_id);
const nodeIds = graph.nodes.map((n) => n.id);
check("assistants_graph", ["triage", "draft", "approve"].every((n) => nodeIds.includes(n)), graph);
const schemas = await client.assistants.getSchemas(assistant.assistant_id);
check("assistants_schemas", "messages" in schemas.state_schema.properties, schemas);

// Threads.
const thread = await client.threads.create({ metadata: { user: "ann" } });
check("threads_create", thread.status === "idle" && thread.metadata.user === "ann", thread);
const again = await client.threads.create({ threadId: thread.thread_id, ifExists: "do_nothing" });
check("threads_create_if_exists", again.thread_id === thread.thread_id, again);
const twice = await refused(client.threads.create({ threadId: thread.thread_id }));
check("threads_create_conflict", twice.includes("409") && twice.includes(thread.thread_id), twice);
const got = await client.threads.get(thread.thread_id);
check("threads_get", got.thread_id === thread.thread_id, got);
const patched = await client.threads.update(thread.thread_id, { metadata: { tier: "gold" } });
check("threads_patch", patched.metadata.user === "ann" && patched.metadata.tier === "gold", patched);
const found = await client.threads.search({ metadata: { tier: "gold" } });
check("threads_search", found.some((t) => t.thread_id === thread.thread_id), found);
const missing = await refused(client.threads.get("no-such-thread"));
check("threads_get_missing", missing.includes("404") && missing.includes("no-such-thread"), missing);

// A streamed run in every mode, up to the interrupt.
let created;
const parts = await collect(
  client.runs.stream(thread.thread_id, "desk", {
    input: ask("Where is my order?"),
    streamMode: ["values", "updates", "custom", "messages-tuple"],
    onRunCreated: (meta) => {
      created = meta;
    },
  }),
);
const events = parts.map((p) => p.event);
check("stream_metadata_first", events[0] === "metadata" && parts[0].data.run_id, parts[0]);
check("stream_content_location", created && created.run_id === parts[0].data.run_id && created.thread_id === thread.thread_id, created);
const values = parts.filter((p) => p.event === "values").map((p) => p.data);
// The state the run starts from first (its input merged), then after each step.
check("stream_values", values.length >= 3 && values[0].messages[0].content === "Where is my order?" && values[0].log.length === 0 && values[1].log[0] === "triage", values);
const shown = values.at(-1).messages;
check(
  "values_messages_langchain",
  shown.length === 2 && shown[0].type === "human" && shown[0].content === "Where is my order?"
    && shown[1].type === "ai" && shown[1].content === "You asked: Where is my order?" && typeof shown[1].id === "string",
  shown,
);
const updates = parts.filter((p) => p.event === "updates").map((p) => p.data);
check("stream_updates", updates[0].triage && updates[1].draft, updates);
const custom = parts.filter((p) => p.event === "custom").map((p) => p.data);
check("stream_custom", custom.length === 1 && custom[0].question === "Where is my order?", custom);
const tuples = parts.filter((p) => p.event === "messages").map((p) => p.data);
const text = tuples.map(([chunk]) => chunk.content).join("");
check(
  "stream_messages_tuple",
  tuples.length > 1 && text === "You asked: Where is my order?" && tuples[0][1].langgraph_node === "draft",
  tuples,
);
const asked = updates.find((u) => u.__interrupt__);
check("stream_interrupt_update", asked && asked.__interrupt__[0].value.question === "Send this answer?", updates);
check("stream_interrupt_values", values.at(-1).__interrupt__?.length === 1, values.at(-1));

// The thread waits at the interrupt.
const waiting = await client.threads.get(thread.thread_id);
check("thread_interrupted", waiting.status === "interrupted" && Object.keys(waiting.interrupts).length === 1, waiting);
const state = await client.threads.getState(thread.thread_id);
check(
  "state_interrupt_task",
  state.next[0] === "approve" && state.tasks[0].name === "approve" && state.tasks[0].interrupts[0].value.question === "Send this answer?",
  state,
);
check("state_checkpoint", typeof state.checkpoint.checkpoint_id === "string" && state.values.log.join() === "triage,draft", state);
const run = await client.runs.get(thread.thread_id, parts[0].data.run_id);
check("runs_get", run.status === "success" && run.thread_id === thread.thread_id, run);

// The interrupt answered with command.resume, waited for.
const resumed = await client.runs.wait(thread.thread_id, "desk", { command: { resume: true } });
check("wait_resume", resumed.approved === true && resumed.log.join() === "triage,draft,approve", resumed);
const idle = await client.threads.get(thread.thread_id);
check("thread_idle", idle.status === "idle" && idle.values.approved === true, idle);

// State at a checkpoint, and history.
const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
check("history", history.length >= 4 && history[0].values.approved === true, history.map((h) => h.checkpoint));
const earlier = await client.threads.getState(thread.thread_id, history.at(-1).checkpoint.checkpoint_id);
check("state_at_checkpoint", earlier.values.approved == null, earlier);

// A state update made as a node.
const updated = await client.threads.updateState(thread.thread_id, { values: { log: ["edited"] }, asNode: "approve" });
const edited = await client.threads.getState(thread.thread_id);
check("update_state", edited.values.log.at(-1) === "edited" && edited.checkpoint.checkpoint_id === updated.checkpoint.checkpoint_id, [updated, edited]);

// A background run, joined.
const background = await client.runs.create(thread.thread_id, "desk", { input: ask("Second question") });
check("runs_create", ["pending", "running"].includes(background.status), background);
const joined = await client.runs.join(thread.thread_id, background.run_id);
check("runs_join", joined.__interrupt__?.length === 1 && joined.messages.length === 4, joined);
const listed = await client.runs.list(thread.thread_id);
check("runs_list", listed.length === 3 && listed[0].run_id === background.run_id, listed.map((r) => r.run_id));
await client.runs.wait(thread.thread_id, "desk", { command: { resume: false } });

// A second run on a busy thread is rejected; a cancelled run ends interrupted.
const busy = await client.threads.create();
const slow = await client.runs.create(busy.thread_id, "desk", { input: ask("slow question") });
await sleep(300);
const rejected = await refused(
  client.runs.create(busy.thread_id, "desk", { input: ask("again"), multitaskStrategy: "reject" }),
);
check("multitask_reject", rejected.includes("409") && rejected.includes("Thread is already running a task"), rejected);
await client.runs.cancel(busy.thread_id, slow.run_id, true);
const cancelled = await client.runs.get(busy.thread_id, slow.run_id);
check("runs_cancel", cancelled.status === "interrupted", cancelled);
const afterCancel = await client.threads.get(busy.thread_id);
check("thread_after_cancel", afterCancel.status === "interrupted", afterCancel);
const continued = await client.runs.wait(busy.thread_id, "desk", { input: null });
check("continue_after_cancel", continued.log.join() === "triage,draft" && continued.__interrupt__?.length === 1, continued);

// Double texting: `interrupt` stops the running run (its committed steps stay), `enqueue` waits.
const doubled = await client.threads.create();
const firstRun = await client.runs.create(doubled.thread_id, "desk", { input: ask("slow first") });
await sleep(300);
const secondValues = await client.runs.wait(doubled.thread_id, "desk", { input: ask("second"), multitaskStrategy: "interrupt" });
const firstAfter = await client.runs.get(doubled.thread_id, firstRun.run_id);
check("multitask_interrupt", secondValues.log.join() === "triage,triage,draft" && firstAfter.status === "interrupted", [secondValues, firstAfter]);
await client.runs.create(doubled.thread_id, "desk", { input: ask("slow again") });
const queued = await client.runs.wait(doubled.thread_id, "desk", { command: { resume: true }, multitaskStrategy: "enqueue" });
check("multitask_enqueue", queued.approved === true && queued.log.at(-1) === "approve", queued);

// Failures: an error event in the stream, `__error__` from wait, the thread in error.
const failing = await client.threads.create();
const failed = await collect(client.runs.stream(failing.thread_id, "desk", { input: ask("fail"), streamMode: "updates" }));
const error = failed.find((p) => p.event === "error");
check("stream_error", error && error.data.message.includes("fail"), failed);
const failingToo = await client.threads.create();
const waitError = await refused(client.runs.wait(failingToo.thread_id, "desk", { input: ask("fail") }));
check("wait_error", waitError.includes("triage cannot route"), waitError);
check("thread_error", (await client.threads.get(failing.thread_id)).status === "error", failing);

// Refusals: an unknown assistant, an unknown stream mode.
const unknown = await refused(client.runs.wait(thread.thread_id, "nobody", { input: ask("hi") }));
check("unknown_assistant", unknown.includes("422") && unknown.includes("nobody"), unknown);
const badMode = await refused(collect(client.runs.stream(thread.thread_id, "desk", { input: ask("hi"), streamMode: "nonsense" })));
check("unknown_stream_mode", badMode.includes("422") && badMode.includes("nonsense"), badMode);

// Breakpoints of a run, and a run without input going on past them.
const paused = await client.threads.create();
const stopped = await client.runs.wait(paused.thread_id, "desk", { input: ask("Pause?"), interruptBefore: ["draft"] });
const pausedState = await client.threads.getState(paused.thread_id);
check("interrupt_before", stopped.log.join() === "triage" && !("__interrupt__" in stopped)
  && pausedState.next.join() === "draft" && (await client.threads.get(paused.thread_id)).status === "interrupted",
  [stopped, pausedState]);
const wentOn = await client.runs.wait(paused.thread_id, "desk", { input: null });
check("continue_after_breakpoint", wentOn.log.join() === "triage,draft" && wentOn.__interrupt__?.length === 1, wentOn);
const everywhere = await client.threads.create();
const atFirst = await client.runs.wait(everywhere.thread_id, "desk", { input: ask("All?"), interruptAfter: "*" });
check("interrupt_after_all", atFirst.log.join() === "triage", atFirst);

// Commands: update alone, goto.
const commanded = await client.threads.create();
await client.runs.wait(commanded.thread_id, "desk", { input: ask("Command?") });
await client.runs.wait(commanded.thread_id, "desk", { command: { resume: true } });
const noted = await client.runs.wait(commanded.thread_id, "desk", { command: { update: { log: ["noted"] } } });
check("command_update", noted.log.join() === "triage,draft,approve,noted", noted);
const jumped = await client.runs.wait(commanded.thread_id, "desk", { command: { goto: ["approve"] } });
check("command_goto", jumped.__interrupt__?.length === 1 && jumped.log.at(-1) === "noted", jumped);

// The messages, tasks, checkpoints, debug and events stream modes.
const modes = await client.threads.create();
const moded = await collect(client.runs.stream(modes.thread_id, "desk", {
  input: ask("Modes?"), streamMode: ["messages", "tasks", "checkpoints", "debug", "events"],
}));
const seen = new Set(moded.map((p) => p.event));
check("stream_modes", ["metadata", "messages/metadata", "messages/partial", "messages/complete", "tasks", "checkpoints", "debug", "events"]
  .every((e) => seen.has(e)), [...seen]);
const debugged = moded.filter((p) => p.event === "debug" && p.data.type === "checkpoint").map((p) => p.data.payload);
const modesHistory = (await client.threads.getHistory(modes.thread_id, { limit: debugged.length })).reverse();
const mine = (c) => JSON.stringify([c.metadata?.step, c.checkpoint, c.parent_checkpoint]);
check("debug_checkpoints_are_history", debugged.length === 4 && debugged.map(mine).join() === modesHistory.map(mine).join(),
  [debugged, modesHistory]);

// Rollback, a run from a checkpoint, thread copy.
const rolled = await client.threads.create();
await client.runs.wait(rolled.thread_id, "desk", { input: ask("Keep me") });
const kept = await client.threads.getState(rolled.thread_id);
const doomed = await client.runs.create(rolled.thread_id, "desk", { input: ask("slow doomed") });
await sleep(600);
await client.runs.cancel(rolled.thread_id, doomed.run_id, true, "rollback");
const afterRollback = await client.threads.getState(rolled.thread_id);
const doomedGone = await refused(client.runs.get(rolled.thread_id, doomed.run_id));
check("cancel_rollback", doomedGone.includes("404") && afterRollback.checkpoint.checkpoint_id === kept.checkpoint.checkpoint_id,
  [afterRollback, kept, doomedGone]);
const rolledHistory = await client.threads.getHistory(rolled.thread_id);
const afterTriage = rolledHistory.find((h) => h.next.join() === "draft");
const fromCheckpoint = await client.runs.wait(rolled.thread_id, "desk", { input: null, checkpoint: afterTriage.checkpoint });
check("run_from_checkpoint", fromCheckpoint.log.join() === "triage,draft" && fromCheckpoint.messages.length === 2, fromCheckpoint);
const copied = await client.threads.copy(rolled.thread_id);
const copiedState = await client.threads.getState(copied.thread_id);
check("threads_copy", copied.thread_id !== rolled.thread_id && copiedState.values.log.join() === "triage,draft"
  && copiedState.values.messages.length === 2 && copiedState.next.join() === "approve", [copiedState, fromCheckpoint]);

// Stateless runs.
const statelessParts = await collect(client.runs.stream(null, "desk", { input: ask("Stateless?"), streamMode: "updates" }));
check("stateless_stream", statelessParts[0].event === "metadata" && statelessParts.some((p) => p.data?.draft), statelessParts);
const statelessWait = await client.runs.wait(null, "desk", { input: ask("Stateless wait?") });
check("stateless_wait", statelessWait.__interrupt__?.length === 1, statelessWait);

// Deletion.
await client.threads.delete(failing.thread_id);
const gone = await refused(client.threads.get(failing.thread_id));
check("threads_delete", gone.includes("404"), gone);
