"""The official LangGraph Python SDK (`langgraph-sdk`, pinned in tests/py/requirements.txt)
against an agentstate-server serving the help desk graph (examples/support/desk.rs) at the URL
given as the first argument, with API key `test-key`.

Prints `ok <check>` per check passed; the first failure raises (exit code 1). Run by
tests/py_sdk.rs, which compares the printed checks with its list.
"""

import asyncio
import json
import sys

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command

URL = sys.argv[1]


def check(name, ok, detail=None):
    if not ok:
        raise AssertionError(f"check `{name}` failed: {json.dumps(detail, indent=1, default=str)}")
    print(f"ok {name}", flush=True)


async def refused(awaitable):
    """The HTTP status and body of a refused call, or None if it succeeded."""
    try:
        await awaitable
    except httpx.HTTPStatusError as error:
        return error.response.status_code, error.response.text
    return None


async def collect(stream):
    return [part async for part in stream]


def ask(text):
    # As LangGraph's add_messages takes them: an OpenAI-style role and a string.
    return {"messages": [{"role": "user", "content": text}]}


async def main():
    client = get_client(url=URL, api_key="test-key")

    # Without the key: 401.
    keyless = get_client(url=URL, api_key=None)
    status = await refused(keyless.assistants.search())
    check("api_key_required", status is not None and status[0] == 401, status)

    # Assistants.
    assistants = await client.assistants.search(graph_id="desk")
    check("assistants_search", len(assistants) == 1 and assistants[0]["graph_id"] == "desk", assistants)
    assistant_id = assistants[0]["assistant_id"]
    schemas = await client.assistants.get_schemas(assistant_id)
    check("assistants_schemas", "messages" in schemas["state_schema"]["properties"], schemas)

    # Threads.
    thread = await client.threads.create(metadata={"user": "bo"})
    tid = thread["thread_id"]
    check("threads_create", thread["status"] == "idle" and thread["metadata"]["user"] == "bo", thread)
    patched = await client.threads.update(tid, metadata={"tier": "gold"})
    check("threads_patch", patched["metadata"] == {"user": "bo", "tier": "gold"}, patched)
    found = await client.threads.search(metadata={"tier": "gold"})
    check("threads_search", any(t["thread_id"] == tid for t in found), found)
    status = await refused(client.threads.get("no-such-thread"))
    check("threads_get_missing", status is not None and status[0] == 404, status)

    # A streamed run in four modes, up to the interrupt.
    created = {}
    parts = await collect(
        client.runs.stream(
            tid,
            "desk",
            input=ask("Where is my order?"),
            stream_mode=["values", "updates", "custom", "messages-tuple"],
            on_run_created=lambda meta: created.update(meta),
        )
    )
    events = [p.event for p in parts]
    check("stream_metadata_first", events[0] == "metadata" and parts[0].data["run_id"], parts[0])
    run_id = parts[0].data["run_id"]
    check("stream_run_created", created.get("run_id") == run_id and created.get("thread_id") == tid, created)
    values = [p.data for p in parts if p.event == "values"]
    # The state the run starts from (its input merged) first, then after each step.
    check("stream_values", len(values) >= 3 and values[0]["log"] == [] and values[1]["log"][:1] == ["triage"], values)
    shown = [(m["type"], m["content"]) for m in values[-1]["messages"]]
    check("values_messages_langchain", shown == [("human", "Where is my order?"), ("ai", "You asked: Where is my order?")], shown)
    updates = [p.data for p in parts if p.event == "updates"]
    check("stream_updates", "triage" in updates[0] and "draft" in updates[1], updates)
    custom = [p.data for p in parts if p.event == "custom"]
    check("stream_custom", custom == [{"topic": "general", "question": "Where is my order?"}], custom)
    tuples = [p.data for p in parts if p.event == "messages"]
    text = "".join(chunk["content"] for chunk, _ in tuples)
    check(
        "stream_messages_tuple",
        len(tuples) > 1 and text == "You asked: Where is my order?" and tuples[0][1]["langgraph_node"] == "draft",
        tuples,
    )
    asked = next((u for u in updates if "__interrupt__" in u), None)
    check("stream_interrupt", asked and asked["__interrupt__"][0]["value"] == {"question": "Send this answer?"}, updates)

    # The thread waits at the interrupt.
    waiting = await client.threads.get(tid)
    check("thread_interrupted", waiting["status"] == "interrupted", waiting)
    state = await client.threads.get_state(tid)
    check(
        "state_interrupt_task",
        state["next"] == ["approve"] and state["tasks"][0]["interrupts"][0]["value"]["question"] == "Send this answer?",
        state,
    )
    run = await client.runs.get(tid, run_id)
    check("runs_get", run["status"] == "success" and run["thread_id"] == tid, run)

    # The interrupt answered by command.resume.
    resumed = await client.runs.wait(tid, "desk", command=Command(resume=True))
    check("wait_resume", resumed["approved"] is True and resumed["log"] == ["triage", "draft", "approve"], resumed)
    idle = await client.threads.get(tid)
    check("thread_idle", idle["status"] == "idle", idle)

    # History, state at a checkpoint, an update made as a node.
    history = await client.threads.get_history(tid, limit=10)
    check("history", len(history) >= 4 and history[0]["values"]["approved"] is True, [h["checkpoint"] for h in history])
    earlier = await client.threads.get_state(tid, checkpoint_id=history[-1]["checkpoint"]["checkpoint_id"])
    check("state_at_checkpoint", earlier["values"].get("approved") is None, earlier)
    updated = await client.threads.update_state(tid, {"log": ["edited"]}, as_node="approve")
    edited = await client.threads.get_state(tid)
    check(
        "update_state",
        edited["values"]["log"][-1] == "edited"
        and edited["checkpoint"]["checkpoint_id"] == updated["checkpoint"]["checkpoint_id"],
        [updated, edited],
    )

    # A background run (slow: its draft takes two seconds), its stream joined while it runs
    # from its first event (`Last-Event-ID: -1`), then the run joined.
    background = await client.runs.create(tid, "desk", input=ask("slow second question"), stream_resumable=True)
    check("runs_create", background["status"] in ("pending", "running"), background)
    await asyncio.sleep(0.3)
    replayed = await collect(client.runs.join_stream(tid, background["run_id"], last_event_id="-1"))
    replayed_values = [p.data for p in replayed if p.event == "values"]
    check(
        "join_stream_replay",
        replayed_values and replayed_values[-1].get("__interrupt__") and "error" not in [p.event for p in replayed],
        [p.event for p in replayed],
    )
    joined = await client.runs.join(tid, background["run_id"])
    check("runs_join", len(joined.get("__interrupt__", [])) == 1 and len(joined["messages"]) == 4, joined)
    listed = await client.runs.list(tid)
    check("runs_list", listed[0]["run_id"] == background["run_id"] and len(listed) == 3, [r["run_id"] for r in listed])
    await client.runs.wait(tid, "desk", command=Command(resume=False))

    # Double texting: reject while busy; cancel; interrupt; enqueue.
    busy = (await client.threads.create())["thread_id"]
    slow = await client.runs.create(busy, "desk", input=ask("slow question"))
    await asyncio.sleep(0.3)
    status = await refused(client.runs.create(busy, "desk", input=ask("again"), multitask_strategy="reject"))
    check("multitask_reject", status is not None and status[0] == 409, status)
    await client.runs.cancel(busy, slow["run_id"], wait=True)
    cancelled = await client.runs.get(busy, slow["run_id"])
    check("runs_cancel", cancelled["status"] == "interrupted", cancelled)
    first = await client.runs.create(busy, "desk", input=ask("slow first"))
    await asyncio.sleep(0.3)
    second = await client.runs.wait(busy, "desk", input=ask("second"), multitask_strategy="interrupt")
    first_after = await client.runs.get(busy, first["run_id"])
    check("multitask_interrupt", first_after["status"] == "interrupted" and "__interrupt__" in second, [second, first_after])
    await client.runs.create(busy, "desk", input=ask("slow again"), multitask_strategy="interrupt")
    queued = await client.runs.wait(busy, "desk", command=Command(resume=True), multitask_strategy="enqueue")
    check("multitask_enqueue", queued["approved"] is True and queued["log"][-1] == "approve", queued)

    # Failures: an error event, wait raising on `__error__`, the thread in error.
    failing = (await client.threads.create())["thread_id"]
    failed = await collect(client.runs.stream(failing, "desk", input=ask("fail"), stream_mode="updates"))
    error = next((p.data for p in failed if p.event == "error"), None)
    check("stream_error", error is not None and "fail" in error["message"], failed)
    try:
        await client.runs.wait((await client.threads.create())["thread_id"], "desk", input=ask("fail"))
        raised = None
    except Exception as exc:  # the SDK raises on a run's `__error__`
        raised = str(exc)
    check("wait_error", raised is not None and "triage cannot route" in raised, raised)
    check("thread_error", (await client.threads.get(failing))["status"] == "error")
    status = await refused(client.runs.wait(tid, "nobody", input=ask("hi")))
    check("unknown_assistant", status is not None and status[0] == 422 and "nobody" in status[1], status)

    # Breakpoints of a run: it stops before (or after) a node, shows no question, and a run
    # without input goes on past the stop.
    paused = (await client.threads.create())["thread_id"]
    stopped = await client.runs.wait(paused, "desk", input=ask("Pause?"), interrupt_before=["draft"])
    paused_state = await client.threads.get_state(paused)
    check(
        "interrupt_before",
        (await client.threads.get(paused))["status"] == "interrupted"
        and stopped["log"] == ["triage"]
        and "__interrupt__" not in stopped
        and paused_state["next"] == ["draft"]
        and paused_state["tasks"][0]["interrupts"] == [],
        [stopped, paused_state],
    )
    went_on = await client.runs.wait(paused, "desk", input=None)
    check(
        "continue_after_breakpoint",
        went_on["log"] == ["triage", "draft"] and len(went_on.get("__interrupt__", [])) == 1,
        went_on,
    )
    after = (await client.threads.create())["thread_id"]
    stopped = await client.runs.wait(after, "desk", input=ask("After?"), interrupt_after=["triage"])
    after_state = await client.threads.get_state(after)
    check("interrupt_after", stopped["log"] == ["triage"] and after_state["next"] == ["draft"], [stopped, after_state])
    status = await refused(client.runs.wait(after, "desk", input=None, interrupt_before=["nowhere"]))
    check("breakpoint_unknown_node", status is not None and status[0] == 422 and "nowhere" in status[1], status)

    # Commands: `update` alone runs no node; `goto` starts the run at a node.
    commanded = (await client.threads.create())["thread_id"]
    await client.runs.wait(commanded, "desk", input=ask("Command?"))
    await client.runs.wait(commanded, "desk", command=Command(resume=True))
    noted = await client.runs.wait(commanded, "desk", command=Command(update={"log": ["noted"]}))
    check("command_update", noted["log"] == ["triage", "draft", "approve", "noted"], noted)
    jumped = await client.runs.wait(commanded, "desk", command=Command(goto="approve", update={"log": ["jump"]}))
    jumped_state = await client.threads.get_state(commanded)
    check(
        "command_goto",
        jumped["log"][-1] == "jump" and len(jumped.get("__interrupt__", [])) == 1 and jumped_state["next"] == ["approve"],
        [jumped, jumped_state],
    )

    # `resume` with `update`: the update is committed with the answer, before the step runs.
    edited_answer = (await client.threads.create())["thread_id"]
    await client.runs.wait(edited_answer, "desk", input=ask("Resume and update?"))
    resumed = await client.runs.wait(edited_answer, "desk", command=Command(resume=True, update={"log": ["edited"]}))
    check(
        "command_resume_update",
        resumed["approved"] is True and resumed["log"] == ["triage", "draft", "edited", "approve"],
        resumed,
    )

    # The tasks, checkpoints, debug and events stream modes; debug's checkpoints are the
    # thread's history.
    modes = (await client.threads.create())["thread_id"]
    parts = await collect(
        client.runs.stream(modes, "desk", input=ask("Modes?"), stream_mode=["tasks", "checkpoints", "debug", "events"])
    )
    tasks = [p.data for p in parts if p.event == "tasks"]
    check(
        "stream_tasks",
        [t["name"] for t in tasks if "input" in t] == ["triage", "draft", "approve"]
        and [t["name"] for t in tasks if "result" in t] == ["triage", "draft"],
        tasks,
    )
    debugged = [p.data["payload"] for p in parts if p.event == "debug" and p.data["type"] == "checkpoint"]
    history = list(reversed(await client.threads.get_history(modes, limit=len(debugged))))
    mine = lambda c: (c["metadata"]["step"], c["checkpoint"], c["parent_checkpoint"])
    check(
        "stream_debug_checkpoints",
        # The run's input checkpoint, its input merged, then `triage` and `draft`.
        len(debugged) == 4 and [mine(c) for c in debugged] == [mine(h) for h in history],
        [debugged, history],
    )
    checkpoints = [p.data for p in parts if p.event == "checkpoints"]
    check(
        "stream_checkpoints",
        [c["next"] for c in checkpoints] == [["__start__"], ["triage"], ["draft"], ["approve"]]
        and checkpoints[-1]["config"]["configurable"]["checkpoint_id"] == history[-1]["checkpoint"]["checkpoint_id"],
        checkpoints,
    )
    kinds = {p.data["event"] for p in parts if p.event == "events"}
    check(
        "stream_events",
        {"on_chain_start", "on_chain_end", "on_chat_model_start", "on_chat_model_stream", "on_chat_model_end"} <= kinds,
        sorted(kinds),
    )

    # The `messages` mode: metadata when a message first shows, the text so far, then the
    # whole message once its node's update has it.
    talk = (await client.threads.create())["thread_id"]
    parts = await collect(client.runs.stream(talk, "desk", input=ask("Messages?"), stream_mode="messages"))
    names = {p.event for p in parts}
    partial = [p.data[0] for p in parts if p.event == "messages/partial"]
    complete = [p.data[0] for p in parts if p.event == "messages/complete"]
    answer = next((m for m in complete if m["type"] == "ai"), None)
    check(
        "stream_messages",
        names == {"metadata", "messages/metadata", "messages/partial", "messages/complete"}
        and parts[-1].event == "messages/complete"
        and answer is not None
        and answer["content"] == "You asked: Messages?"
        and partial[-1]["id"] == answer["id"]
        and partial[-1]["content"] == answer["content"],
        [[p.event, p.data] for p in parts],
    )

    # Rollback: the running run stops and what it did is removed, as if it had never run.
    rolled = (await client.threads.create())["thread_id"]
    await client.runs.wait(rolled, "desk", input=ask("Keep me"))
    await client.runs.wait(rolled, "desk", command=Command(resume=True))
    kept = await client.threads.get_state(rolled)
    doomed = await client.runs.create(rolled, "desk", input=ask("slow doomed"))
    await asyncio.sleep(0.6)
    replaced = await client.runs.wait(rolled, "desk", input=ask("Replacement"), multitask_strategy="rollback")
    gone = await refused(client.runs.get(rolled, doomed["run_id"]))
    said = [m["content"] for m in replaced["messages"]]
    history = await client.threads.get_history(rolled, limit=100)
    check(
        "multitask_rollback",
        gone is not None and gone[0] == 404
        and said == ["Keep me", "You asked: Keep me", "Replacement", "You asked: Replacement"]
        and all(h["metadata"].get("run_id") != doomed["run_id"] for h in history),
        [gone, said],
    )
    before = await client.threads.get_state(rolled)
    doomed = await client.runs.create(rolled, "desk", input=ask("slow cancelled"))
    await asyncio.sleep(0.6)
    await client.runs.cancel(rolled, doomed["run_id"], wait=True, action="rollback")
    after = await client.threads.get_state(rolled)
    gone = await refused(client.runs.get(rolled, doomed["run_id"]))
    check(
        "cancel_rollback",
        gone is not None and gone[0] == 404
        and after["values"] == before["values"]
        and after["checkpoint"] == before["checkpoint"]
        and (await client.threads.get(rolled))["status"] == "interrupted",
        [before, after, kept["checkpoint"]],
    )

    # A run from an earlier checkpoint: the thread goes on from there, what came after kept as a
    # branch (its draft listed beside the new one).
    forked = (await client.threads.create())["thread_id"]
    await client.runs.wait(forked, "desk", input=ask("Original"))
    history = await client.threads.get_history(forked, limit=100)
    after_triage = next(h for h in history if h["next"] == ["draft"])
    again = await client.runs.wait(forked, "desk", input=None, checkpoint_id=after_triage["checkpoint"]["checkpoint_id"])
    steps = [h["metadata"]["step"] for h in await client.threads.get_history(forked, limit=100)]
    check(
        "run_from_checkpoint",
        again["log"] == ["triage", "draft"] and len(again["messages"]) == 2 and steps == [2, 2, 1, 0, -1]
        and len(again.get("__interrupt__", [])) == 1,
        [again, steps],
    )
    at_input = next(h for h in history if h["next"] == ["triage"])
    other = await client.runs.wait(forked, "desk", input=ask("Other"), checkpoint=at_input["checkpoint"])
    said = [m["content"] for m in other["messages"]]
    check("run_from_checkpoint_with_input", said == ["Original", "Other", "You asked: Other"], said)
    status = await refused(client.runs.wait(forked, "desk", input=None, checkpoint_id="999"))
    check("run_from_missing_checkpoint", status is not None and status[0] == 404, status)

    # A state update at an earlier checkpoint: made there, and a run without input goes on.
    edited = (await client.threads.create())["thread_id"]
    await client.runs.wait(edited, "desk", input=ask("Edit me"))
    history = await client.threads.get_history(edited, limit=100)
    after_triage = next(h for h in history if h["next"] == ["draft"])
    await client.threads.update_state(
        edited, {"log": ["edited"]}, as_node="triage", checkpoint_id=after_triage["checkpoint"]["checkpoint_id"]
    )
    state = await client.threads.get_state(edited)
    went_on = await client.runs.wait(edited, "desk", input=None)
    check(
        "update_state_at_checkpoint",
        state["values"]["log"] == ["triage", "edited"] and state["next"] == ["draft"]
        and went_on["log"] == ["triage", "edited", "draft"],
        [state, went_on],
    )

    # Thread copy: a new thread with the source's metadata, status, state and history (the
    # same checkpoints), whose rows are its own.
    source = (await client.threads.create(metadata={"copied": "yes"}))["thread_id"]
    await client.runs.wait(source, "desk", input=ask("Copy me"))
    source_thread = await client.threads.get(source)
    source_state = await client.threads.get_state(source)
    source_history = await client.threads.get_history(source, limit=100)
    copied = await client.threads.copy(source)
    cid = copied["thread_id"]
    # The copy's answer is its record, as LangGraph's: read it back for its values.
    copied = await client.threads.get(cid)
    copy_state = await client.threads.get_state(cid)
    copy_history = await client.threads.get_history(cid, limit=100)
    # What a thread shows, but its id (and its creation time, the state's `created_at`).
    shown = lambda value, thread: json.dumps(
        {k: v for k, v in value.items() if k not in ("created_at", "updated_at", "state_updated_at", "thread_id")}
        if isinstance(value, dict) else value,
        sort_keys=True,
    ).replace(thread, "<thread>")
    check(
        "threads_copy",
        cid != source
        and shown(copied, cid) == shown(source_thread, source)
        and copied["status"] == "interrupted"
        and copied["metadata"]["copied"] == "yes"
        and shown(copy_state, cid) == shown(source_state, source)
        and copy_state["checkpoint"]["thread_id"] == cid
        and len(copy_history) == len(source_history) >= 3
        and [shown(h, cid) for h in copy_history] == [shown(h, source) for h in source_history]
        and [(h["checkpoint"]["checkpoint_id"], h["metadata"]["step"]) for h in copy_history]
        == [(h["checkpoint"]["checkpoint_id"], h["metadata"]["step"]) for h in source_history],
        [copied, source_thread, copy_state, source_state],
    )
    # A run on the copy (answering the interrupt it was copied with) leaves the source as it
    # was; the source's runs are not the copy's.
    no_runs = await client.runs.list(cid)
    answered = await client.runs.wait(cid, "desk", command=Command(resume=True))
    source_after = await client.threads.get_state(source)
    check(
        "threads_copy_independent",
        no_runs == []
        and answered["approved"] is True
        and (await client.threads.get(cid))["status"] == "idle"
        and shown(source_after, source) == shown(source_state, source)
        and (await client.threads.get(source))["status"] == "interrupted"
        and len(await client.threads.get_history(source, limit=100)) == len(source_history),
        [answered, source_after],
    )
    # Busy: refused while a run is in progress on it.
    slow = await client.runs.create(cid, "desk", input=ask("slow copy"))
    await asyncio.sleep(0.3)
    status = await refused(client.threads.copy(cid))
    check(
        "threads_copy_busy",
        status is not None and status[0] == 409 and cid in status[1] and slow["run_id"] in status[1],
        status,
    )
    await client.runs.cancel(cid, slow["run_id"], wait=True)
    # The source deleted: the copy keeps its state and history (but the inputs its `__start__`
    # tasks show, read from the source's run records, which go with the source).
    def without_inputs(history):
        for h in history:
            for task in h["tasks"]:
                if task["name"] == "__start__":
                    task["result"] = None
        return history

    kept_state = await client.threads.get_state(cid)
    kept_history = await client.threads.get_history(cid, limit=100)
    await client.threads.delete(source)
    gone = await refused(client.threads.get(source))
    check(
        "threads_copy_outlives_source",
        gone is not None and gone[0] == 404
        and await client.threads.get_state(cid) == kept_state
        and without_inputs(await client.threads.get_history(cid, limit=100)) == without_inputs(kept_history)
        and len(kept_history) > len(source_history),
        [kept_state, kept_history],
    )

    # Stateless, then deletion.
    stateless = await client.runs.wait(None, "desk", input=ask("Stateless?"))
    check("stateless_wait", len(stateless.get("__interrupt__", [])) == 1, stateless)
    await client.threads.delete(failing)
    status = await refused(client.threads.get(failing))
    check("threads_delete", status is not None and status[0] == 404, status)


asyncio.run(main())
