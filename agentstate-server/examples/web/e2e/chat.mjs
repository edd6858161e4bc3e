// Clicks through the useStream page (`chat` example) in headless Chromium as a person would:
//
//   node e2e/chat.mjs <page URL> <screenshot dir> [<the page on another origin>]
//
// A message and its answer streamed in, the approval (Approve, then Reject on a second turn),
// a reload (the conversation back), a run stopped and continued, a run rejoined after a reload, an answer
// regenerated and the branch switcher, and the page on another origin (CORS). Prints `ok` or
// `fail` per check (tests/browser.rs compares them with what it expects). With `?api=URL` in the
// page's URL the page and these checks use the API there (LangGraph's own server, to compare).
import { checker, expect, launch } from "./browser.mjs";
import { join } from "node:path";

const [url, shots, crossOrigin] = process.argv.slice(2);
const { page, close } = await launch();
const check = checker(page, shots);
// The API the page calls: its `?api=`, or its own origin.
const api = new URL(url).searchParams.get("api") ?? new URL(url).origin;

// Every text an answer bubble showed, in order (the streamed answer grows in place).
await page.addInitScript(() => {
  window.__shown = [];
  new MutationObserver(() => {
    for (const bubble of document.querySelectorAll("[data-testid=ai] .bubble")) {
      if (window.__shown.at(-1) !== bubble.textContent) window.__shown.push(bubble.textContent);
    }
  }).observe(document, { subtree: true, childList: true, characterData: true });
});

const input = page.getByLabel("Message");
const answers = page.locator("[data-testid=ai] .bubble");
const ready = () => page.getByTestId("status").filter({ hasText: "ready" }).waitFor();
const threadId = () => new URL(page.url()).searchParams.get("thread");
async function ask(text) {
  await input.fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}
async function runs() {
  return (await fetch(`${api}/threads/${threadId()}/runs`)).json();
}

await page.goto(url);
await check("answer_streamed_in", async () => {
  const final = "You asked: Where is my order?";
  const streamed = page.waitForResponse((r) => r.url().endsWith("/runs/stream"));
  await ask("Where is my order?");
  await answers.filter({ hasText: final }).waitFor();
  // The server sent the answer in pieces (`messages` events of message chunks)...
  const response = await streamed;
  const body = await response.text();
  const pieces = body.split("\n\n").filter((f) => f.includes("event: messages\n") && f.includes("AIMessageChunk"));
  expect(pieces.length > 1, `the run's stream carried ${pieces.length} pieces of the answer:\n${body.slice(0, 2000)}`);
  // ...which the page shows as they come, unless the browser read them all at once (a loaded
  // machine): told, not checked.
  const shown = await page.evaluate(() => window.__shown);
  const partial = shown.some((t) => t.length > 0 && t.length < final.length && final.startsWith(t));
  console.log(`note: ${partial ? "a partial answer was shown" : "the whole answer came in one read"} (${pieces.length} pieces)`);
});
await check("thread_in_the_address", async () => expect(threadId(), `no thread in ${page.url()}`));
await check("approval_shown", async () => {
  await page.getByTestId("approval").waitFor();
  await page.screenshot({ path: join(shots, "chat-approval.png") });
});
await check("approval_question", async () => {
  const shown = await page.getByTestId("approval").innerText();
  expect(shown.includes("Send this answer?"), `the approval shows \`${shown}\`, not the interrupt's question`);
});
await check("approve", async () => {
  await page.getByRole("button", { name: "Approve" }).click();
  await page.getByTestId("verdict").filter({ hasText: "Approved" }).waitFor();
});
await check("second_turn_reject", async () => {
  await ask("Can I get a refund?");
  await answers.filter({ hasText: "You asked: Can I get a refund?" }).waitFor();
  await page.getByTestId("approval").waitFor();
  await page.screenshot({ path: join(shots, "chat-second-turn.png") });
  await page.getByRole("button", { name: "Reject" }).click();
  await page.getByTestId("verdict").filter({ hasText: "Rejected" }).waitFor();
  const state = await (await fetch(`${api}/threads/${threadId()}/state`)).json();
  expect(state.values.approved === false && state.values.messages.length === 4, `the thread's state: ${JSON.stringify(state.values)}`);
});
await check("reload_shows_history", async () => {
  await page.reload();
  await answers.nth(1).filter({ hasText: "You asked: Can I get a refund?" }).waitFor();
  expect((await page.getByTestId("human").count()) === 2, "two questions after the reload");
  await page.getByTestId("verdict").filter({ hasText: "Rejected" }).waitFor();
});
await check("stop", async () => {
  const earlier = (await runs()).length;
  await ask("slow: stop me");
  await page.getByTestId("status").filter({ hasText: "answering" }).waitFor();
  // Stopped once the run is running on the server (its id known to the page: a Stop before
  // the run's creation was answered has no run to cancel, and only stops listening).
  for (let i = 0; i < 100; i++) {
    const now = await runs();
    if (now.length > earlier && now[0].status === "running") break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await page.getByRole("button", { name: "Stop" }).click();
  await ready();
  // The run was cancelled on the server (the stopped page does not just stop listening).
  let status;
  for (let i = 0; i < 100 && status !== "interrupted"; i++) {
    status = (await runs())[0]?.status;
    if (status !== "interrupted") await new Promise((r) => setTimeout(r, 50));
  }
  expect(status === "interrupted", `the stopped run is \`${status}\`, not \`interrupted\``);
  expect(!(await answers.filter({ hasText: "slow: stop me" }).count()), "the stopped run answered");
  await page.getByTestId("stopped").waitFor();
  expect(!(await page.getByTestId("approval").count()), "a stopped run asks for an approval");
});
await check("continue_after_stop", async () => {
  await page.getByRole("button", { name: "Continue" }).click();
  await answers.filter({ hasText: "You asked: slow: stop me" }).waitFor();
  await page.getByTestId("approval").waitFor();
  await page.getByRole("button", { name: "Reject" }).click();
  await page.getByTestId("verdict").filter({ hasText: "Rejected" }).waitFor();
});
await check("reload_rejoins_a_run", async () => {
  await ask("slow: wait for me");
  await page.getByTestId("status").filter({ hasText: "answering" }).waitFor();
  const before = (await runs())[0];
  expect(before?.status === "running" || before?.status === "pending", `the run is ${before?.status} before the reload`);
  await page.reload();
  // The answer comes in the stream the reloaded page joins: nothing else reads it again.
  await answers.filter({ hasText: "You asked: slow: wait for me" }).waitFor();
  await page.getByTestId("approval").waitFor();
});
await check("approve_after_rejoin", async () => {
  await page.getByRole("button", { name: "Approve" }).click();
  await page.getByTestId("verdict").filter({ hasText: "Approved" }).waitFor();
});
const before = await answers.count();
await check("regenerate", async () => {
  await page.locator("[data-testid=ai]").last().getByRole("button", { name: "Regenerate" }).click();
  await page.getByTestId("approval").waitFor();
  await ready();
  expect((await answers.count()) === before, `${await answers.count()} answers after regenerating, not ${before}`);
  const latest = (await runs())[0];
  // A run from a checkpoint (agentstate-server keeps it in `kwargs.checkpoint`, LangGraph's
  // server in the run's config).
  const from = latest?.kwargs?.checkpoint ?? latest?.kwargs?.config?.configurable?.checkpoint_id;
  expect(from != null && latest.status === "success", `the regenerate run: ${JSON.stringify(latest)}`);
});
await check("branch_switcher", async () => {
  await page.getByTestId("branch-position").filter({ hasText: "2 / 2" }).waitFor({ timeout: 5_000 });
  await page.screenshot({ path: join(shots, "chat-branches.png") });
  await page.getByRole("button", { name: "Previous branch" }).click();
  await page.getByTestId("branch-position").filter({ hasText: "1 / 2" }).waitFor();
  await page.getByTestId("verdict").filter({ hasText: "Approved" }).waitFor();
});
await page.screenshot({ path: join(shots, "chat.png") });

if (crossOrigin) {
  await check("other_origin", async () => {
    await page.goto(crossOrigin);
    await ask("Hello from elsewhere");
    await answers.filter({ hasText: "You asked: Hello from elsewhere" }).waitFor();
    await page.getByTestId("approval").waitFor();
  });
}
await close();
