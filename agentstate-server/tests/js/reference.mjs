// The differential harness's JS driver: the official LangGraph JS SDK (@langchain/langgraph-sdk,
// pinned in package.json) makes the same calls against two servers serving the same graphs
// (tests/reference/graphs.py for LangGraph's `langgraph dev`, tests/support/reference.rs for
// agentstate-server), as tests/reference/driver.py does with the Python SDK, and compares what
// comes back, normalized only where values must differ (ids, timestamps).
//
//     node reference.mjs OURS_URL REFERENCE_URL DIVERGENCES_MD [--only NAME ...] [--show]
//
// Prints `same NAME` or `differs NAME` with both transcripts' differing lines, then the verdict
// against the LangGraph table of the divergences file (scenarios `js-...`): exit 1 if a scenario
// differs that the table does not list, or one it lists no longer differs.
import { Client } from "@langchain/langgraph-sdk";
import { readFileSync } from "node:fs";

const [ours, reference, divergencesPath, ...rest] = process.argv.slice(2);
const show = rest.includes("--show");
const only = rest.includes("--only") ? rest.slice(rest.indexOf("--only") + 1).filter((a) => !a.startsWith("--")) : null;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$/;
const ID_KEYS = new Set(["assistant_id", "thread_id", "run_id", "checkpoint_id", "parent_checkpoint_id", "id",
  "task_id", "interrupt_id", "message_id", "tool_call_id", "parent_ids", "checkpoint_ns"]);
const TIME_KEYS = new Set(["created_at", "updated_at", "timestamp"]);
const VOLATILE_KEYS = new Set(["__request_start_time_ms__", "langgraph_api_url", "langgraph_api_version",
  "langgraph_version", "langgraph_plan"]);

// Ids become `<id N>` in the order they first show (keys in sorted order), timestamps `<time>`.
function normalizer() {
  const ids = new Map();
  const id = (value) => {
    if (!ids.has(value)) ids.set(value, `<id ${ids.size + 1}>`);
    return ids.get(value);
  };
  const normalize = (value, key) => {
    if (Array.isArray(value)) return value.map((v) => normalize(v, key));
    if (value && typeof value === "object") {
      const out = {};
      for (const k of Object.keys(value).sort()) {
        const shownKey = ids.has(k) ? id(k) : k.replace(UUID, (m) => id(m));
        out[shownKey] = normalize(value[k], k);
      }
      return out;
    }
    if (VOLATILE_KEYS.has(key)) return "<volatile>";
    if (typeof value === "string") {
      if (TIME_KEYS.has(key) || TIME.test(value)) return "<time>";
      if (new RegExp(`^${UUID.source}$`).test(value) || (ID_KEYS.has(key) && value !== "")) return id(value);
      return value.replace(UUID, (m) => id(m));
    }
    return value;
  };
  return normalize;
}

class Transcript {
  constructor(url) {
    this.client = new Client({ apiUrl: url, defaultHeaders: {} });
    this.items = [];
  }

  note(call, answer) {
    this.items.push({ call, answer: answer === undefined ? null : answer });
    return answer;
  }

  // The call's answer, or what the SDK threw (its status when it has one).
  async call(what, promise) {
    try {
      return this.note(what, await promise);
    } catch (error) {
      this.note(what, { threw: error.status ?? error.name ?? "error" });
      return null;
    }
  }

  // Every part of a stream: its event and data.
  async stream(what, parts) {
    const seen = [];
    try {
      for await (const part of parts) seen.push([part.event, part.data]);
    } catch (error) {
      seen.push({ threw: error.status ?? error.name ?? "error" });
    }
    return this.note(what, seen);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = () => ({ log: [] });

async function until(check, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(50);
  }
  return false;
}

const SCENARIOS = {
  "js-stream-values-updates": async (t) => {
    const thread = await t.client.threads.create();
    await t.stream("stream", t.client.runs.stream(thread.thread_id, "three",
      { input: log(), streamMode: ["values", "updates", "custom"] }));
  },
  "js-stream-messages": async (t) => {
    const thread = await t.client.threads.create();
    await t.stream("messages-tuple", t.client.runs.stream(thread.thread_id, "chat",
      { input: { messages: [{ type: "human", content: "hi" }] }, streamMode: ["messages-tuple", "values"] }));
  },
  "js-wait-state-history": async (t) => {
    const thread = await t.client.threads.create({ metadata: { k: "v" } });
    await t.call("wait", t.client.runs.wait(thread.thread_id, "three", { input: log() }));
    await t.call("thread", t.client.threads.get(thread.thread_id));
    await t.call("state", t.client.threads.getState(thread.thread_id));
    await t.call("history", t.client.threads.getHistory(thread.thread_id, { limit: 3 }));
  },
  "js-interrupt-resume": async (t) => {
    const thread = await t.client.threads.create();
    await t.call("until the interrupt", t.client.runs.wait(thread.thread_id, "ask", { input: log() }));
    await t.call("thread", t.client.threads.get(thread.thread_id));
    await t.stream("resume", t.client.runs.stream(thread.thread_id, "ask",
      { command: { resume: "yes" }, streamMode: ["values", "updates"] }));
  },
  "js-error": async (t) => {
    const thread = await t.client.threads.create();
    await t.stream("stream", t.client.runs.stream(thread.thread_id, "fail", { input: log(), streamMode: "updates" }));
    await t.call("thread", t.client.threads.get(thread.thread_id));
  },
  "js-background-join-cancel": async (t) => {
    const thread = await t.client.threads.create();
    const run = await t.call("create", t.client.runs.create(thread.thread_id, "slow", { input: { delay: 0.3 } }));
    await t.call("join", t.client.runs.join(thread.thread_id, run.run_id));
    await t.call("list", t.client.runs.list(thread.thread_id));
    const long = await t.client.runs.create(thread.thread_id, "slow", { input: { delay: 2 } });
    await until(async () => (await t.client.runs.get(thread.thread_id, long.run_id)).status === "running");
    await sleep(200);
    await t.call("cancel", t.client.runs.cancel(thread.thread_id, long.run_id, true));
    await t.call("cancelled", t.client.runs.get(thread.thread_id, long.run_id));
  },
  "js-threads": async (t) => {
    const suite = crypto.randomUUID();
    for (const n of [0, 1, 2]) {
      await t.client.threads.create({ metadata: { suite, n } });
      await sleep(10);
    }
    const found = await t.client.threads.search({ metadata: { suite }, limit: 2, offset: 1 });
    t.note("search", found.map((th) => th.metadata.n));
    await t.call("missing", t.client.threads.get(crypto.randomUUID()));
    await t.call("assistants", t.client.assistants.search({ graphId: "ask" }));
  },
};

function divergences(path) {
  const listed = new Set();
  let section = null;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.startsWith("## ")) section = line.includes("LangGraph") ? "langgraph" : "other";
    const match = /^\| `([a-z0-9-]+)` \|/.exec(line);
    if (match && section === "langgraph") listed.add(match[1]);
  }
  return listed;
}

async function transcript(url, name) {
  const t = new Transcript(url);
  try {
    await Promise.race([
      SCENARIOS[name](t),
      sleep(90000).then(() => { throw new Error("the scenario took more than 90 s"); }),
    ]);
  } catch (error) {
    t.note("the scenario threw", String(error.message ?? error));
  }
  return normalizer()(t.items);
}

const dump = (value) => JSON.stringify(value, null, 1).split("\n");
const listed = divergences(divergencesPath);
const names = only ?? Object.keys(SCENARIOS);
const differ = [];
for (const name of names) {
  const [mine, theirs] = await Promise.all([transcript(ours, name), transcript(reference, name)]);
  if (show) {
    console.log(`== ${name}: agentstate-server\n${dump(mine).join("\n")}`);
    console.log(`== ${name}: reference\n${dump(theirs).join("\n")}`);
  }
  const a = dump(theirs);
  const b = dump(mine);
  if (a.join("\n") === b.join("\n")) {
    console.log(`same ${name}`);
    continue;
  }
  differ.push(name);
  console.log(`differs ${name}`);
  // The lines that differ, with their place (a plain line diff, enough to find them).
  let shown = 0;
  for (let i = 0; i < Math.max(a.length, b.length) && shown < 40; i++) {
    if (a[i] !== b[i]) {
      console.log(`    @${i + 1} reference: ${a[i] ?? ""}`);
      console.log(`    @${i + 1} agentstate-server: ${b[i] ?? ""}`);
      shown++;
    }
  }
}
const unlisted = differ.filter((n) => !listed.has(n));
const stale = names.filter((n) => listed.has(n) && !differ.includes(n));
console.log(`${names.length - differ.length} same, ${differ.length} differ (${differ.length - unlisted.length} listed as divergences)`);
for (const n of unlisted) console.log(`not listed in ${divergencesPath}: \`${n}\` differs`);
for (const n of stale) console.log(`listed in ${divergencesPath} but the same now: \`${n}\` (remove its row)`);
process.exit(unlisted.length || stale.length ? 1 : 0);
