"""The server benchmark's three-node graph for LangGraph (examples/support/three.rs is the same
graph for agentstate-server): `a`, `b` and `c` in a row, each appending its name to `log`."""

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class Three(TypedDict):
    log: Annotated[list[str], operator.add]


def step(name):
    def node(state: Three):
        return {"log": [name]}

    return node


builder = StateGraph(Three)
for name in ["a", "b", "c"]:
    builder.add_node(name, step(name))
builder.add_edge(START, "a")
builder.add_edge("a", "b")
builder.add_edge("b", "c")
builder.add_edge("c", END)
graph = builder.compile()
