"""The AG-UI differential harness's reference: the concierge graph of `tests/agui_reference.rs`,
written with LangGraph and served by ag-ui-langgraph's FastAPI endpoint
(`add_langgraph_fastapi_endpoint`) at `/agui/concierge`, on an in-memory checkpointer.

Run by `tests/agui_reference.rs` as `python agui_graphs.py` (uvicorn on a free port of
127.0.0.1); it prints `ready PORT` once it has the port. The Rust graph in that test is the same
graph, node for node: keep the two in step.

The agent is configured with `emit_interrupt_outcome=True`: an interrupted run ends with
AG-UI's interrupt outcome (as agentstate-server's do), not only with the `on_interrupt` CUSTOM
event that ag-ui-langgraph sends by default.
"""

import re
import socket
from typing import Annotated, Any, Iterator, Optional

import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.callbacks import adispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt
from typing_extensions import NotRequired, TypedDict


# `ag-ui` and `copilotkit` as ag-ui-langgraph fills them (the client's tools and context; and
# CopilotKitState's `actions`).
Concierge = TypedDict("Concierge", {
    "messages": Annotated[list, add_messages],
    "tools": NotRequired[list],
    "ag-ui": NotRequired[dict],
    "copilotkit": NotRequired[dict],
    "note": NotRequired[str],
    "approved": NotRequired[bool],
})


class Scripted(BaseChatModel):
    """A chat model that streams one scripted answer: its text split as GenericFakeChatModel
    splits it (on whitespace, kept), or one tool call whose arguments come in two pieces."""

    text: str = ""
    call: Optional[dict] = None
    fail_after: Optional[int] = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _chunks(self) -> list:
        if self.call is not None:
            return [
                AIMessageChunk(content="", tool_call_chunks=[{
                    "name": self.call["name"] if i == 0 else None,
                    "args": piece,
                    "id": self.call["id"] if i == 0 else None,
                    "index": 0,
                }])
                for i, piece in enumerate(self.call["pieces"])
            ]
        return [AIMessageChunk(content=t) for t in re.split(r"(\s)", self.text) if t]

    def _stream(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for i, chunk in enumerate(self._chunks()):
            if self.fail_after is not None and i == self.fail_after:
                raise ValueError("the concierge broke down mid-answer")
            generation = ChatGenerationChunk(message=chunk)
            if run_manager:
                run_manager.on_llm_new_token(chunk.content, chunk=generation)
            yield generation

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        message: Any = None
        for generation in self._stream(messages, stop, run_manager, **kwargs):
            message = generation.message if message is None else message + generation.message
        return ChatResult(generations=[ChatGeneration(message=AIMessage(**{
            k: v for k, v in message.model_dump().items() if k in ("content", "tool_calls", "id")
        }))])


def asked(state: Concierge) -> Optional[str]:
    last = state["messages"][-1] if state["messages"] else None
    return last.content if last is not None and last.type == "human" else None


async def model(state: Concierge):
    q = asked(state)
    last = state["messages"][-1] if state["messages"] else None
    if q in ("refund", "write"):
        return {}
    if q == "fail":
        raise ValueError("the concierge cannot answer `fail`")
    if q == "break":
        await Scripted(text="I will not finish this", fail_after=2).ainvoke(state["messages"])
    if q == "progress":
        await adispatch_custom_event("progress", {"done": 1})
    if q == "weather":
        n = len(state["messages"])
        call = {"name": "weather", "id": f"call-{n}", "pieces": ['{"city": ', '"Paris"}']}
        reply = await Scripted(call=call).ainvoke(state["messages"])
        return {"messages": [reply]}
    if q == "order" and any(t.get("name") == "confirm_order" for t in state.get("tools", [])):
        n = len(state["messages"])
        call = {"name": "confirm_order", "id": f"call-{n}", "pieces": ['{"item": ', '"book"}']}
        reply = await Scripted(call=call).ainvoke(state["messages"])
        return {"messages": [reply]}
    if q is not None:
        text = f"You said: {q}"
        if q == "note":
            text = f"Your note: {state.get('note', 'none')}"
        if q == "actions":
            names = [t["name"] for t in state.get("copilotkit", {}).get("actions", [])]
            # ag-ui-langgraph puts the context in as ag_ui's `Context` objects.
            context = [getattr(c, "value", None) or c["value"] for c in state.get("ag-ui", {}).get("context", [])]
            text = f"Actions: {' '.join(names)}; context: {' '.join(context)}"
    elif last is not None and last.type == "tool":
        text = f"The user chose: {last.content}"
    else:
        text = "Nothing to answer."
    reply = await Scripted(text=text).ainvoke(state["messages"])
    return {"messages": [reply]}


@tool
def weather(city: str) -> str:
    """The weather in a city (a backend tool: the graph runs it)."""
    return f"sunny in {city}"


def writer(state: Concierge):
    return {"messages": [AIMessage(content="Written without streaming.", id="written-1")]}


def approve(state: Concierge):
    yes = interrupt("Refund 30 EUR?") is True
    return {"approved": yes, "messages": [AIMessage(content="Refunded." if yes else "Not refunded.")]}


def route(state: Concierge):
    last = state["messages"][-1] if state["messages"] else None
    if last is not None and last.type == "ai" and any(c["name"] == "weather" for c in last.tool_calls):
        return "tools"
    q = asked(state)
    return {"refund": "approve", "write": "writer"}.get(q, END)


builder = StateGraph(Concierge)
builder.add_node("model", model)
builder.add_node("writer", writer)
builder.add_node("approve", approve)
builder.add_node("tools", ToolNode([weather]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", route, ["approve", "writer", "tools", END])
builder.add_edge("tools", "model")
builder.add_edge("approve", END)
builder.add_edge("writer", END)
graph = builder.compile(checkpointer=InMemorySaver())

app = FastAPI()
add_langgraph_fastapi_endpoint(
    app,
    LangGraphAgent(name="concierge", graph=graph, emit_interrupt_outcome=True),
    "/agui/concierge",
)


if __name__ == "__main__":
    # A free port of 127.0.0.1, taken here (no other process can take it meanwhile).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"ready {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])
