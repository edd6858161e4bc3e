// The help desk chat: React and @langchain/langgraph-sdk's `useStream` on agentstate-server's
// LangGraph API (the `chat` example serves this page and the API on one origin; `?api=URL`
// points it at a server on another origin, which must answer CORS: `cors_permissive`).
//
// Send a message (the answer streams in), approve or reject it (the desk graph's `approve`
// node asks), stop a run, regenerate an answer and switch between the branches, reload (the
// thread is in the URL: its history comes back, and a run in progress is rejoined).
import { useStream } from "@langchain/langgraph-sdk/react";
import "./chat.css";
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get("api") ?? window.location.origin;

/// A message's text (a string, or content blocks).
function text(message) {
  if (typeof message.content === "string") return message.content;
  return (message.content ?? []).map((part) => (part.type === "text" ? part.text : "")).join("");
}

/// The thread in the address bar, so that a reload finds it.
function rememberThread(threadId) {
  const url = new URL(window.location.href);
  url.searchParams.set("thread", threadId);
  window.history.replaceState(null, "", url);
}

function BranchSwitcher({ branch, branchOptions, onSelect }) {
  if (!branchOptions || branchOptions.length < 2) return null;
  const index = branchOptions.indexOf(branch);
  return (
    <span className="branches" data-testid="branches">
      <button type="button" aria-label="Previous branch" disabled={index <= 0}
        onClick={() => onSelect(branchOptions[index - 1])}>‹</button>
      <span data-testid="branch-position">{index + 1} / {branchOptions.length}</span>
      <button type="button" aria-label="Next branch" disabled={index >= branchOptions.length - 1}
        onClick={() => onSelect(branchOptions[index + 1])}>›</button>
    </span>
  );
}

function Message({ message, meta, busy, onRegenerate, onBranch }) {
  const human = message.type === "human";
  return (
    <li className={`message ${human ? "human" : "ai"}`} data-testid={human ? "human" : "ai"}>
      <div className="bubble">{text(message)}</div>
      {!human && (
        <div className="tools">
          <BranchSwitcher branch={meta?.branch} branchOptions={meta?.branchOptions} onSelect={onBranch} />
          <button type="button" className="regenerate" disabled={busy}
            onClick={() => onRegenerate(meta)}>Regenerate</button>
        </div>
      )}
    </li>
  );
}

function Chat() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const [draft, setDraft] = useState("");
  const [error, setError] = useState(null);
  const stream = useStream({
    apiUrl,
    assistantId: "desk",
    messagesKey: "messages",
    threadId,
    onThreadId: (id) => {
      setThreadId(id);
      rememberThread(id);
    },
    // A run in progress when the page went away is joined again (its id kept in sessionStorage).
    reconnectOnMount: true,
    // The thread's checkpoints, for the branches of a regenerated answer.
    fetchStateHistory: true,
    onError: (e) => setError(String(e?.message ?? e)),
  });

  const send = (event) => {
    event.preventDefault();
    const content = draft.trim();
    if (!content) return;
    setDraft("");
    setError(null);
    const message = { type: "human", content };
    stream.submit(
      { messages: [message] },
      { optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), message] }) },
    );
  };

  // Runs again from the checkpoint before the answer first showed: a new branch.
  const regenerate = (meta) => {
    setError(null);
    stream.submit(undefined, { checkpoint: meta?.firstSeenState?.parent_checkpoint });
  };

  const answer = (approved) => stream.submit(undefined, { command: { resume: approved } });

  // The run waits at the `approve` node: the interrupt's question. A thread whose state shows
  // where it stopped but not the question (useStream then reports a breakpoint) waits there
  // too if its last node was `draft`; any other stop is a run cut short (Stop), which a run
  // without input continues.
  const interrupt = stream.isLoading ? undefined : stream.interrupt;
  const asked = interrupt?.value?.question;
  const waiting = asked != null || (interrupt?.when === "breakpoint" && stream.values?.log?.at(-1) === "draft");
  const question = asked ?? "The answer waits for your approval.";
  const stopped = interrupt != null && !waiting;
  const approved = stream.values?.approved;
  return (
    <main>
      <header>
        <h1>Help desk</h1>
        <span className="status" data-testid="status">
          {stream.isLoading ? "answering…" : stream.isThreadLoading ? "loading…" : "ready"}
        </span>
      </header>
      <ol className="messages" data-testid="messages">
        {stream.messages.map((message, index) => (
          <Message key={message.id ?? index} message={message} busy={stream.isLoading}
            meta={stream.getMessagesMetadata(message, index)}
            onRegenerate={regenerate} onBranch={stream.setBranch} />
        ))}
      </ol>
      {waiting && (
        <div className="approval" data-testid="approval">
          <span>{question}</span>
          <button type="button" onClick={() => answer(true)}>Approve</button>
          <button type="button" onClick={() => answer(false)}>Reject</button>
        </div>
      )}
      {stopped && (
        <div className="stopped" data-testid="stopped">
          <span>Stopped.</span>
          <button type="button" onClick={() => stream.submit(undefined)}>Continue</button>
        </div>
      )}
      {!waiting && !stopped && approved != null && !stream.isLoading && (
        <div className="verdict" data-testid="verdict">{approved ? "Approved: sent." : "Rejected: not sent."}</div>
      )}
      {error && <div className="error" data-testid="error">{error}</div>}
      <form onSubmit={send}>
        <input aria-label="Message" placeholder="Ask the help desk…" value={draft}
          onChange={(e) => setDraft(e.target.value)} />
        {stream.isLoading
          ? <button type="button" onClick={() => stream.stop()}>Stop</button>
          : <button type="submit" disabled={!draft.trim()}>Send</button>}
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<StrictMode><Chat /></StrictMode>);
