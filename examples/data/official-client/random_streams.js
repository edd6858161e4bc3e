// Random AG-UI streams from a small alphabet of ids, so that events interact: subagents, event
// metadata, number spellings (2.0 and 2), chunks, snapshots, and events that break the rules.
//   node random_streams.js SEED N DIR   (writes DIR/0.json ... DIR/N-1.json)
const fs = require("fs");
let seed = Number(process.argv[2] || 1);
const N = Number(process.argv[3] || 250);
const dir = process.argv[4] || "streams";
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (a) => a[Math.floor(rnd() * a.length)];
const chance = (p) => rnd() < p;
const NUM = (v) => ({ __num: v });
const ids = ["a", "b", "c"];
const tags = [undefined, undefined, "s1", "s2"];
function meta() { if (!chance(0.3)) return undefined; const m = {}; m[pick(["u", "f"])] = pick([1, NUM("2.0"), "x", null, { z: 1 }]); return m; }
function ev(e) {
  const t = pick(tags); if (t !== undefined) e.subagentRunId = t;
  const m = meta(); if (m) e.metadata = m;
  return e;
}
function one() {
  const k = Math.floor(rnd() * 30);
  const id = pick(ids);
  switch (k) {
    case 0: return { type: "RUN_STARTED", threadId: "t", runId: "r", ...(chance(0.2) ? { input: { threadId: "t", runId: "r", state: {}, messages: [{ id: pick(ids), role: "user", content: "in", ...(chance(0.5) ? { subagentRunId: "s1" } : {}) }], tools: [], context: [], forwardedProps: {} } } : {}) };
    case 1: return { type: "RUN_FINISHED", threadId: "t", runId: "r" };
    case 2: return chance(0.3) ? { type: "RUN_ERROR", message: "x" } : ev({ type: "CUSTOM", name: "c", value: 1 });
    case 3: case 4: return ev({ type: "TEXT_MESSAGE_START", messageId: id, ...(chance(0.2) ? { role: "user" } : {}), ...(chance(0.2) ? { name: "n" } : {}) });
    case 5: case 6: return ev({ type: "TEXT_MESSAGE_CONTENT", messageId: id, delta: "d" });
    case 7: return ev({ type: "TEXT_MESSAGE_END", messageId: id });
    case 8: { const e = ev({ type: "TOOL_CALL_START", toolCallId: "c" + id, toolCallName: pick(["f", "g"]) }); if (chance(0.6)) e.parentMessageId = pick(ids); return e; }
    case 9: return ev({ type: "TOOL_CALL_ARGS", toolCallId: "c" + id, delta: "{}" });
    case 10: return ev({ type: "TOOL_CALL_END", toolCallId: "c" + id });
    case 11: return ev({ type: "TOOL_CALL_RESULT", messageId: "res" + id, toolCallId: "c" + pick(ids), content: "ok" });
    case 12: case 13: case 14: { const e = ev({ type: "TEXT_MESSAGE_CHUNK", delta: "k" }); if (chance(0.6)) e.messageId = id; if (chance(0.15)) e.role = pick(["assistant", "user"]); if (chance(0.1)) e.name = "n"; if (chance(0.15)) delete e.delta; return e; }
    case 15: case 16: { const e = ev({ type: "TOOL_CALL_CHUNK", delta: "x" }); if (chance(0.6)) { e.toolCallId = "k" + id; } if (chance(0.6)) e.toolCallName = pick(["f", "f", "g"]); if (chance(0.4)) e.parentMessageId = pick(ids); return e; }
    case 17: { const e = ev({ type: "REASONING_MESSAGE_CHUNK", delta: "r" }); if (chance(0.6)) e.messageId = "r" + id; return e; }
    case 18: return ev(pick([{ type: "REASONING_MESSAGE_START", messageId: "r" + id, role: "reasoning" }, { type: "REASONING_MESSAGE_CONTENT", messageId: "r" + id, delta: "z" }, { type: "REASONING_MESSAGE_END", messageId: "r" + id }, { type: "REASONING_START", messageId: "r" + id }, { type: "REASONING_END", messageId: "r" + id }]));
    case 19: return ev({ type: "REASONING_ENCRYPTED_VALUE", subtype: pick(["message", "tool-call"]), entityId: pick(["a", "ca", "ra"]), encryptedValue: "enc" });
    case 20: { const e = ev({ type: "ACTIVITY_SNAPSHOT", messageId: pick([id, "act"]), activityType: "plan", content: { n: NUM("1.0") } }); if (chance(0.3)) e.replace = chance(0.5); return e; }
    case 21: return ev({ type: "ACTIVITY_DELTA", messageId: pick([id, "act"]), activityType: "plan", patch: [{ op: "test", path: "/n", value: NUM(pick(["1", "1.0", "2"])) }, { op: "add", path: "/m", value: NUM("3.0") }] });
    case 22: return ev({ type: "STATE_SNAPSHOT", snapshot: { count: NUM(pick(["2.0", "2"])), list: [NUM("1.0")] } });
    case 23: return ev({ type: "STATE_DELTA", delta: [{ op: "test", path: pick(["/count", "/list/0", "/list"]), value: pick([NUM("2"), NUM("1"), [NUM("1")], NUM("2.5")]) }, { op: "replace", path: "/count", value: NUM("3.0") }] });
    case 24: return ev({ type: pick(["STEP_STARTED", "STEP_FINISHED"]), stepName: pick(["p", "q"]) });
    case 25: { const e = { type: "SUBAGENT_STARTED", subagentRunId: pick(["s1", "s2", "s3"]), name: "h" }; if (chance(0.2)) e.parentSubagentRunId = pick(["s1", "s2"]); return e; }
    case 26: return { type: pick(["SUBAGENT_FINISHED", "SUBAGENT_ERROR"]), subagentRunId: pick(["s1", "s2", "s3"]), message: "m" };
    case 27: return { type: "MESSAGES_SNAPSHOT", messages: [{ id, role: pick(["assistant", "user"]), content: "snap", ...(chance(0.4) ? { subagentRunId: pick(["s1", "s2"]) } : {}), ...(chance(0.3) ? { metadata: { m: 1 } } : {}), ...(chance(0.3) ? { toolCalls: [{ id: "c" + pick(ids), type: "function", function: { name: "f", arguments: "{}" } }] } : {}) }].filter((m) => m.role === "assistant" || !m.toolCalls) };
    case 28: return ev({ type: "RAW", event: { x: 1 } });
    default: return ev({ type: "TEXT_MESSAGE_CHUNK", messageId: id, delta: "q" });
  }
}
fs.mkdirSync(dir, { recursive: true });
for (let i = 0; i < N; i++) {
  const s = [{ type: "RUN_STARTED", threadId: "t", runId: "r" }];
  const n = 5 + Math.floor(rnd() * 30);
  for (let j = 0; j < n; j++) s.push(one());
  // Numbers spelled as written: `2.0` stays `2.0` on the wire.
  const text = JSON.stringify(s, (k, v) => (v && typeof v === "object" && "__num" in v ? "@@" + v.__num + "@@" : v));
  fs.writeFileSync(`${dir}/${i}.json`, text.replace(/"@@([0-9.\-]+)@@"/g, "$1"));
}
