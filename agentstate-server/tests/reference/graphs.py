"""The differential harness's graphs for LangGraph's `langgraph dev` (`tests/support/reference.rs`
has the same graphs for agentstate-server): small, each for a part of the API.

- `three`: `a` -> `b` -> `c`, each appending its name to `log`; `a` also writes a custom event.
- `chat`: LangGraph's `add_messages` field `messages`; `reply` answers the last message with
  an AI message `You said: <text>` (written whole, not streamed).
- `ask`: `first` -> `ask` (an interrupt asking `{"question": "ok?"}`, the answer kept in
  `answer`) -> `last`.
- `fail`: `ok` -> `boom`, which raises `ValueError("boom")`.
- `slow`: `wait` (sleeps `delay` seconds, 1 by default) -> `done`.
"""

import asyncio
import operator
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def appends(name):
    def node(state):
        return {"log": [name]}

    return node


def a(state: Log):
    get_stream_writer()({"node": "a", "seen": len(state["log"])})
    return {"log": ["a"]}


builder = StateGraph(Log)
builder.add_node("a", a)
builder.add_node("b", appends("b"))
builder.add_node("c", appends("c"))
builder.add_edge(START, "a")
builder.add_edge("a", "b")
builder.add_edge("b", "c")
builder.add_edge("c", END)
three = builder.compile()


class Chat(TypedDict):
    messages: Annotated[list, add_messages]


def reply(state: Chat):
    return {"messages": [AIMessage(content=f"You said: {state['messages'][-1].content}")]}


builder = StateGraph(Chat)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)
chat = builder.compile()


class Ask(TypedDict):
    log: Annotated[list[str], operator.add]
    answer: str


def ask_node(state: Ask):
    answer = interrupt({"question": "ok?"})
    return {"answer": answer, "log": ["ask"]}


builder = StateGraph(Ask)
builder.add_node("first", appends("first"))
builder.add_node("ask", ask_node)
builder.add_node("last", appends("last"))
builder.add_edge(START, "first")
builder.add_edge("first", "ask")
builder.add_edge("ask", "last")
builder.add_edge("last", END)
ask = builder.compile()


def boom(state: Log):
    raise ValueError("boom")


builder = StateGraph(Log)
builder.add_node("ok", appends("ok"))
builder.add_node("boom", boom)
builder.add_edge(START, "ok")
builder.add_edge("ok", "boom")
builder.add_edge("boom", END)
fail = builder.compile()


class Slow(TypedDict):
    log: Annotated[list[str], operator.add]
    delay: float


async def wait(state: Slow):
    await asyncio.sleep(state.get("delay") or 1.0)
    return {"log": ["wait"]}


builder = StateGraph(Slow)
builder.add_node("wait", wait)
builder.add_node("done", appends("done"))
builder.add_edge(START, "wait")
builder.add_edge("wait", "done")
builder.add_edge("done", END)
slow = builder.compile()
