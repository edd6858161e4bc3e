// Clicks through CopilotKit's chat (copilotkit.mjs: the runtime and the page, on
// agentstate-server's AG-UI endpoint) in headless Chromium as a person would:
//
//   node e2e/copilot.mjs <page URL> <agentstate-server URL> <screenshot dir>
//
// A message and its streamed answer, a frontend tool (`set_theme`, run by the page) and the
// agent's answer to its result (a second turn), then an approval (`useInterrupt`) approved.
// Prints `ok` or `fail` per check (tests/browser.rs compares them with what it expects).
import { checker, expect, launch } from "./browser.mjs";
import { join } from "node:path";

const [url, server, shots] = process.argv.slice(2);
const { page, close } = await launch();
const check = checker(page, shots);
const box = page.getByTestId("copilot-chat-textarea");
const main = page.locator("main");

// The chat's thread on the server: the `threadId` of the runs the page asks the runtime for.
let threadId;
page.on("request", (request) => {
  if (request.method() === "POST" && request.url().endsWith("/agent/concierge/run")) {
    threadId = JSON.parse(request.postData()).threadId;
  }
});
async function thread() {
  expect(threadId, "the page started no run");
  return (await fetch(`${server}/threads/${threadId}`)).json();
}
async function ask(text) {
  await box.fill(text);
  await box.press("Enter");
}

await page.goto(url);
await check("answer_streamed_in", async () => {
  await ask("hello");
  await main.getByText("You said: hello").waitFor();
});
await check("frontend_tool", async () => {
  await ask("theme green");
  await page.getByTestId("theme").filter({ hasText: "theme: green" }).waitFor();
});
await check("frontend_tool_result_answered", async () => {
  await main.getByText("The page says: the theme is green").waitFor();
  const t = await thread();
  const kinds = t.values.messages.map((m) => m.type);
  expect(JSON.stringify(kinds) === JSON.stringify(["human", "ai", "human", "ai", "tool", "ai"]),
    `the thread's messages: ${JSON.stringify(kinds)}`);
});
await check("approval_shown", async () => {
  await ask("refund");
  await page.getByTestId("approval").filter({ hasText: "Refund 30 EUR?" }).waitFor();
  await page.screenshot({ path: join(shots, "copilotkit-approval.png") });
  expect((await thread()).status === "interrupted", "the thread waits");
});
await check("approve", async () => {
  await page.getByRole("button", { name: "Approve" }).click();
  await main.getByText("Refunded.").waitFor();
  const t = await thread();
  expect(t.values.approved === true && t.status === "idle", `the thread: ${t.status}, approved ${t.values.approved}`);
});
await page.screenshot({ path: join(shots, "copilotkit.png") });
await close();
