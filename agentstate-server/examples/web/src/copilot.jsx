// CopilotKit's chat (@copilotkit/react-core's v2 API) on agentstate-server's AG-UI endpoint,
// through CopilotKit's runtime (copilotkit.mjs serves this page and the runtime, whose agent
// `concierge` is an HttpAgent on the server's `/agui/concierge`).
//
// The concierge echoes (`You said: ...`), asks before a refund (`refund`: an interrupt, shown
// here with `useInterrupt`), and calls the page's tool `set_theme` (`theme <color>`: a frontend
// tool, `useFrontendTool`), whose result it answers in the next run.
import { CopilotChat, CopilotKitProvider, useFrontendTool, useInterrupt } from "@copilotkit/react-core/v2";
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { z } from "zod";
import "./copilot.css";

function Tools({ setTheme }) {
  useFrontendTool({
    name: "set_theme",
    description: "Sets the page's accent color",
    parameters: z.object({ color: z.string().describe("a CSS color name") }),
    handler: async ({ color }) => {
      setTheme(color);
      return `the theme is ${color}`;
    },
  });
  useInterrupt({
    agentId: "concierge",
    render: ({ interrupt, resolve }) => (
      <div className="approval" data-testid="approval">
        <span>{String(interrupt?.message ?? interrupt?.value ?? "Approve?")}</span>
        <button type="button" onClick={() => resolve(true)}>Approve</button>
        <button type="button" onClick={() => resolve(false)}>Reject</button>
      </div>
    ),
  });
  return null;
}

function Page() {
  const [theme, setTheme] = useState(null);
  return (
    <CopilotKitProvider runtimeUrl="/api/copilotkit">
      <Tools setTheme={setTheme} />
      <main style={{ "--accent": theme ?? "#2f6fed" }}>
        <header>
          <h1>Concierge</h1>
          <span className="theme" data-testid="theme">theme: {theme ?? "default"}</span>
        </header>
        <CopilotChat agentId="concierge" />
      </main>
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")).render(<StrictMode><Page /></StrictMode>);
