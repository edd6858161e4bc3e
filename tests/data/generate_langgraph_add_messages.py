"""Generates tests/data/langgraph_add_messages.json: random message lists and updates merged by
the real LangGraph `add_messages` (langgraph 1.2.22, langchain-core 1.x).

    python tests/data/generate_langgraph_add_messages.py 600 > tests/data/langgraph_add_messages.json

Each case: `state`, the list before (messages with distinct ids from a pool of six); `update`,
entries `["message", id or null, text]`, `["remove", id]` or `["remove_all"]`; `expect`, either
`{"ok": [[id or null, text, kind], ...]}` (ids LangGraph made up are null; kind is "message", or
"removal" where LangGraph kept a `RemoveMessage` in the list) or `{"error": "..."}`.
"""

import json
import random
import sys

from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

POOL = ["a", "b", "c", "d", "e", "f"]


def entry(rng):
    r = rng.random()
    if r < 0.55:
        return ["message", rng.choice(POOL + [None]), "t%d" % rng.randint(0, 99)]
    if r < 0.9:
        return ["remove", rng.choice(POOL)]
    return ["remove_all"]


def to_langchain(e):
    if e[0] == "message":
        m = HumanMessage(content=e[2])
        if e[1] is not None:
            m.id = e[1]
        return m
    if e[0] == "remove":
        return RemoveMessage(id=e[1])
    return RemoveMessage(id=REMOVE_ALL_MESSAGES)


def main():
    rng = random.Random(2026)
    cases = []
    for _ in range(int(sys.argv[1])):
        ids = rng.sample(POOL, rng.randint(0, 5))
        state = [["message", i, "s%d" % rng.randint(0, 99)] for i in ids]
        update = [entry(rng) for _ in range(rng.randint(0, 6))]
        try:
            merged = add_messages(
                [to_langchain(e) for e in state], [to_langchain(e) for e in update]
            )
            expect = {
                "ok": [
                    [
                        m.id if m.id in POOL else None,
                        m.content,
                        "removal" if isinstance(m, RemoveMessage) else "message",
                    ]
                    for m in merged
                ]
            }
        except ValueError as e:
            expect = {"error": str(e)}
        cases.append({"state": state, "update": update, "expect": expect})
    json.dump(cases, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


main()
