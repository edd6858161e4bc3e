"""The differential harness's driver: the official LangGraph Python SDK (`langgraph-sdk`) makes
the same calls against two servers serving the same graphs (`graphs.py` for LangGraph's
`langgraph dev`, `tests/support/reference.rs` for agentstate-server), and compares what comes
back, normalized only where values must differ (ids, timestamps).

    python driver.py OURS_URL REFERENCE_URL DIVERGENCES_MD [--only NAME ...] [--show]

Each scenario runs against both servers at once; its transcript (what each call answered, or
the status and body of a refusal) is normalized, then compared. Prints `same NAME` or `differs
NAME` with a unified diff of the two transcripts, then the verdict against the table of
divergences (`docs/divergences.md`, its LangGraph section): exit 1 if a scenario differs that
the table does not list, or one it lists no longer differs. `--show` prints both transcripts.
"""

import argparse
import asyncio
import difflib
import json
import re
import sys
import time
import uuid

import httpx
from langgraph_sdk import get_client

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$")
# Keys whose string values are ids the two servers make differently.
ID_KEYS = {
    "assistant_id", "thread_id", "run_id", "checkpoint_id", "parent_checkpoint_id", "id",
    "task_id", "interrupt_id", "message_id", "tool_call_id", "parent_ids", "checkpoint_ns",
}
TIME_KEYS = {"created_at", "updated_at", "timestamp"}
# Keys whose values are the moment or the place of a request (never the same twice), or the
# server's own name and version.
VOLATILE_KEYS = {
    "__request_start_time_ms__", "langgraph_api_url", "langgraph_api_version", "langgraph_version",
    "langgraph_plan",
}


class Normalizer:
    """Ids become `<id N>` in the order they first show, timestamps `<time>`."""

    def __init__(self):
        self.ids = {}

    def id(self, value):
        if value not in self.ids:
            self.ids[value] = f"<id {len(self.ids) + 1}>"
        return self.ids[value]

    def key(self, key):
        if isinstance(key, str) and key in self.ids:
            return self.id(key)
        if isinstance(key, str):
            return UUID.sub(lambda m: self.id(m.group(0)), key)
        return key

    def __call__(self, value, key=None):
        if isinstance(value, dict):
            # In the order of their keys, not the order each server wrote them in, so that
            # ids are numbered alike.
            return {self.key(k): self(value[k], k) for k in sorted(value)}
        if isinstance(value, (list, tuple)):
            return [self(v, key) for v in value]
        if key in VOLATILE_KEYS:
            return "<volatile>"
        if isinstance(value, str):
            if key in TIME_KEYS or TIME.match(value):
                return "<time>"
            if UUID.fullmatch(value) or (key in ID_KEYS and value != ""):
                return self.id(value)
            return UUID.sub(lambda m: self.id(m.group(0)), value)
        return value


class Transcript:
    """What a scenario's calls answered, in order."""

    def __init__(self, client, url):
        self.client = client
        self.url = url
        self.items = []
        self.http = httpx.AsyncClient(base_url=url, timeout=60)

    def note(self, what, value):
        self.items.append({"call": what, "answer": value})
        return value

    async def call(self, what, awaitable):
        """The call's answer, its refusal's status and body, or the error the SDK raised."""
        try:
            return self.note(what, await awaitable)
        except httpx.HTTPStatusError as error:
            try:
                body = error.response.json()
            except ValueError:
                body = error.response.text
            self.note(what, {"status": error.response.status_code, "body": body})
        except Exception as error:  # noqa: BLE001 - what the SDK raised is the answer
            self.note(what, {"raised": f"{type(error).__name__}: {error}"})
        return None

    async def stream(self, what, parts):
        """Every part of a stream: its event and data."""
        seen = []
        try:
            async for part in parts:
                seen.append([part.event, part.data])
        except httpx.HTTPStatusError as error:
            try:
                body = error.response.json()
            except ValueError:
                body = error.response.text
            seen.append({"status": error.response.status_code, "body": body})
        return self.note(what, seen)

    async def raw(self, what, method, path, body=None):
        """A plain HTTP call: its status and JSON body (for what the SDK does not expose)."""
        response = await self.http.request(method, path, json=body)
        try:
            answer = response.json()
        except ValueError:
            answer = response.text
        return self.note(what, {"status": response.status_code, "body": answer})


async def until(check, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False


SCENARIOS = {}
# agentstate-server's URL (the `openapi` scenario documents, on both servers, what it serves).
OURS = None


def scenario(function):
    SCENARIOS[function.__name__.replace("_", "-")] = function
    return function


def log_input():
    return {"log": []}


def ask_user(text):
    return {"messages": [{"role": "user", "content": text}]}


# ---- assistants ----


@scenario
async def assistants_search(t):
    found = await t.client.assistants.search(graph_id="three")
    t.note("search graph_id", found)
    t.note("search all: graph ids, newest first", [a["graph_id"] for a in await t.client.assistants.search()])
    t.note("search limit 2 offset 1", [a["graph_id"] for a in await t.client.assistants.search(limit=2, offset=1)])
    await t.call("get", t.client.assistants.get(found[0]["assistant_id"]))
    await t.call("get missing", t.client.assistants.get(str(uuid.uuid4())))


@scenario
async def assistants_graph(t):
    for graph in ["three", "ask"]:
        await t.call(f"graph {graph}", t.client.assistants.get_graph(graph))


@scenario
async def assistants_schemas(t):
    schemas = await t.client.assistants.get_schemas("three")
    t.note("keys", sorted(schemas))
    t.note("state properties", sorted(schemas["state_schema"]["properties"]))


# ---- threads ----


@scenario
async def threads_crud(t):
    thread = await t.call("create", t.client.threads.create(metadata={"k": "v"}))
    tid = thread["thread_id"]
    await t.call("get", t.client.threads.get(tid))
    await t.call("create again", t.client.threads.create(thread_id=tid))
    await t.call("create again do_nothing", t.client.threads.create(thread_id=tid, if_exists="do_nothing"))
    await t.call("update", t.client.threads.update(tid, metadata={"k2": 2}))
    await t.call("state of a new thread", t.client.threads.get_state(tid))
    await t.call("history of a new thread", t.client.threads.get_history(tid))
    await t.call("delete", t.client.threads.delete(tid))
    await t.call("get deleted", t.client.threads.get(tid))
    await t.call("get missing", t.client.threads.get(str(uuid.uuid4())))


@scenario
async def threads_search(t):
    suite = str(uuid.uuid4())
    ids = []
    for n in range(4):
        thread = await t.client.threads.create(metadata={"suite": suite, "n": n, "odd": n % 2 == 1})
        ids.append(thread["thread_id"])
        await asyncio.sleep(0.01)
    await t.client.runs.wait(ids[0], "three", input=log_input())
    ns = lambda found: [th["metadata"]["n"] for th in found]  # noqa: E731
    t.note("by metadata", ns(await t.client.threads.search(metadata={"suite": suite})))
    t.note("odd", ns(await t.client.threads.search(metadata={"suite": suite, "odd": True})))
    t.note("limit offset", ns(await t.client.threads.search(metadata={"suite": suite}, limit=2, offset=1)))
    t.note("idle", ns(await t.client.threads.search(metadata={"suite": suite}, status="idle")))
    t.note(
        "created_at asc",
        ns(await t.client.threads.search(metadata={"suite": suite}, sort_by="created_at", sort_order="asc")),
    )
    t.note("by ids", ns(await t.client.threads.search(ids=ids[1:3])))
    t.note("count", await t.client.threads.count(metadata={"suite": suite}))
    t.note("the run's thread", (await t.client.threads.search(ids=[ids[0]]))[0])


# ---- stream modes ----


async def stream_on_new_thread(t, graph, stream_mode, input, what=None):
    thread = await t.client.threads.create()
    return await t.stream(
        what or f"stream {stream_mode}",
        t.client.runs.stream(thread["thread_id"], graph, input=input, stream_mode=stream_mode),
    )


@scenario
async def stream_values(t):
    await stream_on_new_thread(t, "three", "values", log_input())


@scenario
async def stream_updates(t):
    await stream_on_new_thread(t, "three", "updates", log_input())


@scenario
async def stream_custom(t):
    await stream_on_new_thread(t, "three", "custom", log_input())


@scenario
async def stream_combined(t):
    await stream_on_new_thread(t, "three", ["values", "updates", "custom"], log_input())


@scenario
async def stream_messages_tuple(t):
    await stream_on_new_thread(t, "chat", "messages-tuple", ask_user("hi"))


@scenario
async def stream_messages(t):
    await stream_on_new_thread(t, "chat", "messages", ask_user("hi"))


@scenario
async def stream_values_chat(t):
    await stream_on_new_thread(t, "chat", "values", ask_user("hi"))


@scenario
async def stream_tasks(t):
    await stream_on_new_thread(t, "three", "tasks", log_input())


@scenario
async def stream_checkpoints(t):
    await stream_on_new_thread(t, "three", "checkpoints", log_input())


@scenario
async def stream_debug(t):
    await stream_on_new_thread(t, "three", "debug", log_input())


@scenario
async def stream_interrupt(t):
    await stream_on_new_thread(t, "ask", ["values", "updates"], log_input())


@scenario
async def stream_error(t):
    await stream_on_new_thread(t, "fail", ["values", "updates"], log_input())


@scenario
async def stream_stateless(t):
    await t.stream("stateless", t.client.runs.stream(None, "three", input=log_input(), stream_mode="updates"))


# ---- wait, state and history ----


@scenario
async def wait_result(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.call("wait", t.client.runs.wait(tid, "three", input=log_input()))
    await t.call("thread", t.client.threads.get(tid))
    await t.call("state", t.client.threads.get_state(tid))
    await t.call("wait again", t.client.runs.wait(tid, "three", input={"log": ["x"]}))
    await t.call("state after two runs", t.client.threads.get_state(tid))


@scenario
async def wait_error(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.call("wait", t.client.runs.wait(tid, "fail", input=log_input()))
    await t.call("thread", t.client.threads.get(tid))
    runs = await t.client.runs.list(tid)
    t.note("run status", [r["status"] for r in runs])
    await t.call("state", t.client.threads.get_state(tid))


@scenario
async def wait_stateless(t):
    await t.call("stateless wait", t.client.runs.wait(None, "three", input=log_input()))


@scenario
async def history(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.client.runs.wait(tid, "three", input=log_input())
    await t.client.runs.wait(tid, "three", input={"log": ["x"]})
    history = await t.call("history", t.client.threads.get_history(tid, limit=20))
    await t.call("history limit 3", t.client.threads.get_history(tid, limit=3))
    if history:
        cid = history[3]["checkpoint"]["checkpoint_id"]
        await t.call("state at a checkpoint", t.client.threads.get_state(tid, checkpoint_id=cid))


# ---- interrupts and commands ----


@scenario
async def interrupt_resume(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.call("wait until the interrupt", t.client.runs.wait(tid, "ask", input=log_input()))
    await t.call("thread", t.client.threads.get(tid))
    await t.call("state", t.client.threads.get_state(tid))
    await t.call("history", t.client.threads.get_history(tid))
    await t.stream(
        "resume",
        t.client.runs.stream(tid, "ask", command={"resume": "yes"}, stream_mode=["values", "updates"]),
    )
    await t.call("state after", t.client.threads.get_state(tid))
    await t.call("thread after", t.client.threads.get(tid))


@scenario
async def command_update_goto(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.client.runs.wait(tid, "three", input=log_input())
    await t.stream(
        "goto b with an update",
        t.client.runs.stream(tid, "three", command={"update": {"log": ["u"]}, "goto": "b"}, stream_mode="updates"),
    )
    await t.call("state", t.client.threads.get_state(tid))


@scenario
async def breakpoints(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.call("before b", t.client.runs.wait(tid, "three", input=log_input(), interrupt_before=["b"]))
    await t.call("state", t.client.threads.get_state(tid))
    await t.call("thread", t.client.threads.get(tid))
    await t.call("continue", t.client.runs.wait(tid, "three", input=None))
    await t.call("after a", t.client.runs.wait(tid, "three", input=log_input(), interrupt_after=["a"]))
    await t.call("state after a", t.client.threads.get_state(tid))


@scenario
async def update_state(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.client.runs.wait(tid, "three", input=log_input())
    await t.call("update as b", t.client.threads.update_state(tid, {"log": ["manual"]}, as_node="b"))
    await t.call("state", t.client.threads.get_state(tid))
    await t.call("continue", t.client.runs.wait(tid, "three", input=None))


@scenario
async def run_from_checkpoint(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.client.runs.wait(tid, "three", input=log_input())
    history = await t.client.threads.get_history(tid)
    after_a = next(h for h in history if h["next"] == ["b"])
    await t.call(
        "from the checkpoint after a",
        t.client.runs.wait(tid, "three", input=None, checkpoint_id=after_a["checkpoint"]["checkpoint_id"]),
    )
    await t.call("history", t.client.threads.get_history(tid, limit=20))


@scenario
async def thread_copy(t):
    thread = await t.client.threads.create(metadata={"k": "v"})
    tid = thread["thread_id"]
    await t.client.runs.wait(tid, "three", input=log_input())
    copy = await t.call("copy", t.client.threads.copy(tid))
    if copy:
        await t.call("copy's state", t.client.threads.get_state(copy["thread_id"]))
        await t.call("copy's history", t.client.threads.get_history(copy["thread_id"]))


@scenario
async def chat_two_turns(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.call("turn 1", t.client.runs.wait(tid, "chat", input=ask_user("one")))
    await t.call("turn 2", t.client.runs.wait(tid, "chat", input=ask_user("two")))


@scenario
async def graph_switch(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.call("three", t.client.runs.wait(tid, "three", input=log_input()))
    await t.call("then fail's graph on the same thread", t.client.runs.wait(tid, "slow", input={"delay": 0.01}))


# ---- background runs, join, multitask, cancel ----


@scenario
async def background_join(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    run = await t.call("create", t.client.runs.create(tid, "slow", input={"delay": 0.3}))
    await t.call("join", t.client.runs.join(tid, run["run_id"]))
    await t.call("get", t.client.runs.get(tid, run["run_id"]))
    await t.call("list", t.client.runs.list(tid))
    await t.stream("join_stream after it ended", t.client.runs.join_stream(tid, run["run_id"]))
    await t.call("delete", t.client.runs.delete(tid, run["run_id"]))
    await t.call("get deleted", t.client.runs.get(tid, run["run_id"]))


@scenario
async def join_stream_running(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    run = await t.client.runs.create(tid, "slow", input={"delay": 0.5}, stream_mode=["values", "updates"])
    await t.stream("join_stream", t.client.runs.join_stream(tid, run["run_id"]))


async def second_run(t, strategy):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    first = await t.client.runs.create(tid, "slow", input={"delay": 1.0})
    await until(lambda: running(t, tid, first["run_id"]))
    kwargs = {} if strategy is None else {"multitask_strategy": strategy}
    second = await t.call(
        f"second run ({strategy or 'default'})",
        t.client.runs.create(tid, "slow", input={"delay": 0.01, "log": ["second"]}, **kwargs),
    )
    if second:
        await t.call("join second", t.client.runs.join(tid, second["run_id"]))
    await t.call("join first", t.client.runs.join(tid, first["run_id"]))
    await t.call("first", t.client.runs.get(tid, first["run_id"]))
    t.note("statuses", [r["status"] for r in await t.client.runs.list(tid)])
    await t.call("state", t.client.threads.get_state(tid))


async def running(t, tid, rid):
    return (await t.client.runs.get(tid, rid))["status"] == "running"


@scenario
async def multitask_default(t):
    await second_run(t, None)


@scenario
async def multitask_reject(t):
    await second_run(t, "reject")


@scenario
async def multitask_interrupt(t):
    await second_run(t, "interrupt")


@scenario
async def multitask_rollback(t):
    await second_run(t, "rollback")


@scenario
async def multitask_enqueue(t):
    await second_run(t, "enqueue")


@scenario
async def cancel_running(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    run = await t.client.runs.create(tid, "slow", input={"delay": 2.0})
    await until(lambda: running(t, tid, run["run_id"]))
    await asyncio.sleep(0.2)
    await t.call("cancel wait", t.client.runs.cancel(tid, run["run_id"], wait=True))
    await t.call("run", t.client.runs.get(tid, run["run_id"]))
    await t.call("thread", t.client.threads.get(tid))
    await t.call("state", t.client.threads.get_state(tid))
    await t.call("cancel again", t.client.runs.cancel(tid, run["run_id"]))


@scenario
async def cancel_rollback(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    await t.client.runs.wait(tid, "slow", input={"delay": 0.01})
    run = await t.client.runs.create(tid, "slow", input={"delay": 2.0})
    await until(lambda: running(t, tid, run["run_id"]))
    await asyncio.sleep(0.2)
    await t.call("cancel rollback", t.client.runs.cancel(tid, run["run_id"], wait=True, action="rollback"))
    await t.call("run", t.client.runs.get(tid, run["run_id"]))
    await t.call("thread", t.client.threads.get(tid))
    await t.call("state", t.client.threads.get_state(tid))


@scenario
async def cancel_pending(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    first = await t.client.runs.create(tid, "slow", input={"delay": 1.0})
    second = await t.client.runs.create(tid, "slow", input={"delay": 0.01}, multitask_strategy="enqueue")
    await t.call("second pending", t.client.runs.get(tid, second["run_id"]))
    await t.call("cancel the pending run", t.client.runs.cancel(tid, second["run_id"], wait=True))
    await t.call("second", t.client.runs.get(tid, second["run_id"]))
    await t.call("join first", t.client.runs.join(tid, first["run_id"]))


@scenario
async def after_seconds(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    run = await t.client.runs.create(tid, "three", input=log_input(), after_seconds=1)
    await asyncio.sleep(0.3)
    await t.call("pending before its time", t.client.runs.get(tid, run["run_id"]))
    await t.call("join", t.client.runs.join(tid, run["run_id"]))


# ---- refusals ----


@scenario
async def refusals(t):
    thread = await t.client.threads.create()
    tid = thread["thread_id"]
    missing = str(uuid.uuid4())
    await t.call("run on a missing thread", t.client.runs.wait(missing, "three", input=log_input()))
    await t.call("run of a missing assistant", t.client.runs.wait(tid, "nope", input=log_input()))
    await t.stream("a bad stream mode", t.client.runs.stream(tid, "three", input=log_input(), stream_mode="nope"))
    await t.call("a missing run", t.client.runs.get(tid, missing))
    await t.call("cancel a missing run", t.client.runs.cancel(tid, missing))
    await t.call("state of a missing thread", t.client.threads.get_state(missing))
    await t.raw("crons", "POST", "/runs/crons/search", {})
    await t.raw("store", "POST", "/store/items/search", {"namespace_prefix": ["a"]})
    await t.raw("unknown route", "GET", "/nope")


# ---- the spec and its page ----

# The operations of this server's spec that the reference's does not have: AG-UI's endpoint
# (langgraph dev serves no AG-UI). `openapi-extras` lists them; `openapi` compares the rest.
EXTRA_OPERATIONS = {"POST /agui/{assistant}"}


def operations(spec):
    """A spec's operations by `METHOD path`."""
    return {
        f"{method.upper()} {path}": operation
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method != "parameters"
    }


async def our_operations():
    """The operations agentstate-server's spec documents (the same list for both servers)."""
    async with httpx.AsyncClient(base_url=OURS, timeout=60) as http:
        return operations((await http.get("/openapi.json")).json())


@scenario
async def openapi(t):
    """Each operation agentstate-server documents (but AG-UI's), as this server's spec
    documents it: its tags, summary, path parameters, where each of our parameters is, whether
    it takes a body; the graph ids' enum; and `/docs`, the page with the spec inlined."""
    ours = await our_operations()
    answer = await t.http.get("/openapi.json")
    t.note("openapi.json", {"status": answer.status_code, "content-type": answer.headers["content-type"]})
    spec = answer.json()
    t.note("openapi version", spec["openapi"].split(".")[0])
    theirs = operations(spec)
    for name in sorted(set(ours) - EXTRA_OPERATIONS):
        operation = theirs.get(name)
        if operation is None:
            t.note(name, "not documented")
            continue
        where = {p["name"]: p["in"] for p in operation.get("parameters", [])}
        # Our parameters by where this spec has them (`missing`: not at all).
        ours_where = {}
        for p in ours[name].get("parameters", []):
            ours_where.setdefault(where.get(p["name"], "missing"), []).append(p["name"])
        t.note(name, {
            "tags": operation.get("tags"),
            "summary": operation.get("summary"),
            "path parameters": sorted(n for n, at in where.items() if at == "path"),
            "our parameters, by where": {k: sorted(v) for k, v in ours_where.items()},
            "request body": "requestBody" in operation,
        })
    graph_ids = spec["components"]["schemas"]["Assistant"]["properties"]["graph_id"].get("enum")
    t.note("Assistant.graph_id enum", sorted(graph_ids or []))
    t.note("security schemes (no key)", spec.get("components", {}).get("securitySchemes"))
    docs = await t.http.get("/docs")
    before, _, rest = docs.text.partition("var configuration = ")
    configuration, _, after = rest.partition("\n")
    t.note("docs", {
        "status": docs.status_code,
        "content-type": docs.headers["content-type"],
        "page": before + "<the configuration>\n" + after,
        "configuration has no <": "<" not in configuration,
        "the spec inlined": json.loads(configuration)["content"] == answer.text,
    })


@scenario
async def openapi_extras(t):
    """Whether this server's spec documents the operations only agentstate-server serves."""
    theirs = operations((await t.http.get("/openapi.json")).json())
    for name in sorted(EXTRA_OPERATIONS):
        t.note(name, name in theirs)


# ---- the harness ----


def divergences(path):
    """The scenarios the LangGraph table of the divergences file lists."""
    listed, section = set(), None
    for line in open(path, encoding="utf-8"):
        if line.startswith("## "):
            section = "langgraph" if "LangGraph" in line else "other"
        match = re.match(r"^\| `([a-z0-9-]+)` \|", line)
        if match and section == "langgraph":
            listed.add(match.group(1))
    return listed


async def transcript(url, name):
    client = get_client(url=url, timeout=60)
    t = Transcript(client, url)
    try:
        await asyncio.wait_for(SCENARIOS[name](t), timeout=90)
    except Exception as error:  # noqa: BLE001 - a scenario that broke is a transcript too
        t.note("the scenario raised", f"{type(error).__name__}: {error}")
    finally:
        await t.http.aclose()
    return Normalizer()(t.items)


def dump(value):
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).splitlines()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ours")
    parser.add_argument("reference")
    parser.add_argument("divergences")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    global OURS
    OURS = args.ours
    listed = divergences(args.divergences)
    names = args.only or list(SCENARIOS)
    differ = []
    for name in names:
        ours, theirs = await asyncio.gather(transcript(args.ours, name), transcript(args.reference, name))
        if args.show:
            print(f"== {name}: agentstate-server\n" + "\n".join(dump(ours)))
            print(f"== {name}: reference\n" + "\n".join(dump(theirs)))
        if ours == theirs:
            print(f"same {name}", flush=True)
            continue
        differ.append(name)
        print(f"differs {name}")
        diff = difflib.unified_diff(dump(theirs), dump(ours), "reference", "agentstate-server", n=2, lineterm="")
        for line in diff:
            print(f"    {line}")
        sys.stdout.flush()
    # `js-...` rows are the JS driver's (tests/js/reference.mjs).
    verdict(args.divergences, names, differ, listed, lambda n: n in SCENARIOS or n.startswith("js-"))


def verdict(path, names, differ, listed, known):
    """Prints how many of `names` are the same and each that `differ`s though the divergences
    file at `path` does not list it, is listed but the same now, or is listed but not `known`;
    exits 1 if any is."""
    unlisted = [n for n in differ if n not in listed]
    stale = [n for n in names if n in listed and n not in differ]
    unknown = sorted(n for n in listed if not known(n))
    print(f"{len(names) - len(differ)} same, {len(differ)} differ ({len(differ) - len(unlisted)} listed as divergences)")
    for n in unlisted:
        print(f"not listed in {path}: `{n}` differs")
    for n in stale:
        print(f"listed in {path} but the same now: `{n}` (remove its row)")
    for n in unknown:
        print(f"listed in {path} but no such scenario: `{n}`")
    sys.exit(1 if unlisted or stale or unknown else 0)

if __name__ == "__main__":
    asyncio.run(main())
