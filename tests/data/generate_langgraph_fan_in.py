"""Generates tests/data/langgraph_fan_in.json: parallel branches run by a real LangGraph graph
(langgraph 1.2.22), each writing some of a reducer field and a field without a reducer.

    python tests/data/generate_langgraph_fan_in.py 400 > tests/data/langgraph_fan_in.json

The graph's state: `log: Annotated[list, operator.add]` and `last: int`, starting at
`{"log": [0], "last": 0}`; START fans out to branches n0, n1, ... (up to four), each returning its
update in one step. A branch writes `log` (a list, or `{"__overwrite__": list}`, sent as
LangGraph's `Overwrite`) and/or `last`. Each case: `branches`, the updates in branch order;
`expect`, `{"ok": {"log": ..., "last": ...}}` or `{"error": ...}` (LangGraph's
`InvalidUpdateError`: two writes to `last`, or two Overwrites of `log`).
"""

import json
import operator
import random
import sys
from typing import Annotated, TypedDict

from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph
from langgraph.types import Overwrite


class State(TypedDict):
    log: Annotated[list, operator.add]
    last: int


def node(update):
    def run(_state):
        return {
            key: Overwrite(value["__overwrite__"]) if isinstance(value, dict) else value
            for key, value in update.items()
        }

    return run


def main():
    rng = random.Random(2026)
    cases = []
    for _ in range(int(sys.argv[1])):
        branches = []
        for i in range(rng.randint(1, 4)):
            update = {}
            r = rng.random()
            if r < 0.45:
                update["log"] = [i + 1, rng.randint(0, 9)]
            elif r < 0.6:
                update["log"] = {"__overwrite__": [100 + i]}
            if rng.random() < 0.35:
                update["last"] = 10 + i
            branches.append(update)
        graph = StateGraph(State)
        for i, update in enumerate(branches):
            graph.add_node("n%d" % i, node(update))
            graph.add_edge(START, "n%d" % i)
            graph.add_edge("n%d" % i, END)
        try:
            out = graph.compile().invoke({"log": [0], "last": 0})
            expect = {"ok": {"log": out["log"], "last": out["last"]}}
        except InvalidUpdateError as e:
            expect = {"error": str(e).split("\n")[0]}
        cases.append({"branches": branches, "expect": expect})
    json.dump(cases, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


main()
