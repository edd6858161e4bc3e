// Folds AG-UI event streams through the official client, @ag-ui/client 1.0.0, exactly as an
// application receives them (AbstractAgent.runAgent: enforceEvents, transformChunks,
// verifyEvents, defaultApplyEvents), and prints one line per input file:
// {"messages", "state", "ignored"}. Where the client aborts the run on an event, that event is
// removed and the stream folded again, until the client accepts it; `ignored` lists the
// removed events' indices (the fold must ignore exactly those).
//
//   npm install && node fold.js ../metadata.json
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "1";
const { AbstractAgent } = require("@ag-ui/client");
const { Observable } = require("rxjs");
const fs = require("fs");
console.warn = console.error = console.debug = () => {};

class Replay extends AbstractAgent {
  constructor(events) {
    super({ threadId: "thread" });
    this.events = events;
  }
  run() {
    return new Observable((subscriber) => {
      for (const event of this.events) subscriber.next(structuredClone(event));
      subscriber.complete();
    });
  }
}

async function officialFold(events) {
  const agent = new Replay(events);
  try {
    await agent.runAgent();
    return { messages: agent.messages, state: agent.state, error: null };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

async function foldIgnoringRefused(events) {
  let kept = events.map((event, index) => ({ event, index }));
  const ignored = [];
  for (;;) {
    const result = await officialFold(kept.map((k) => k.event));
    if (result.error === null) return { messages: result.messages, state: result.state, ignored };
    // The first event the client refuses: the shortest failing prefix.
    let end = 1;
    while ((await officialFold(kept.slice(0, end).map((k) => k.event))).error === null) end++;
    ignored.push(kept[end - 1].index);
    kept.splice(end - 1, 1);
  }
}

(async () => {
  for (const file of process.argv.slice(2)) {
    const events = JSON.parse(fs.readFileSync(file, "utf8"));
    process.stdout.write(JSON.stringify(await foldIgnoringRefused(events)) + "\n");
  }
})();
