"""The differential harness's custom-auth half: two users (the bearer tokens of `auth.py`) make
the same requests, over HTTP, against two servers serving the same graphs with owner-only
rules (`langgraph dev` with `langgraph-auth.json`, agentstate-server with `BearerTokens` and
`OwnerOnly`), and the answers are compared, step by step: the status, and what the step shows
of the body (a refusal's `detail`, ids and timestamps normalized; a 401's `detail` is each
server's authenticator's own sentence, so only its status is compared).

    python auth_driver.py OURS_URL REFERENCE_URL DIVERGENCES_MD

Prints `same STEP` or `differs STEP` with both answers, then the verdict against the table of
divergences (`docs/divergences.md`, its section "Users kept apart"): exit 1 if a step differs
that the table does not list, or one it lists no longer differs.
"""

import asyncio
import json
import re
import sys
import uuid

import httpx

from driver import verdict

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ALICE = {"Authorization": "Bearer token-alice"}
BOB = {"Authorization": "Bearer token-bob"}
# What a user's run's `configurable` says of its user.
USER_KEYS = ["langgraph_auth_user", "langgraph_auth_user_id", "langgraph_auth_permissions", "user_id"]


def shown(response, show=None):
    """What a step compares of `response`: its status, and `show` of its JSON (a refusal: its
    `detail`), ids as `<id>`."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if status == 401:
        what = None
    elif status >= 400:
        what = body.get("detail") if isinstance(body, dict) else body
    else:
        what = show(body) if show else None
    return [status, json.loads(UUID.sub("<id>", json.dumps(what, sort_keys=True)))]


async def scenario(url):
    """The steps against the server at `url`, each with what it answered."""
    steps = {}
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:

        async def step(name, method, path, user=None, body=None, show=None):
            headers = user or {}
            response = await http.request(method, path, headers=headers, json=body)
            steps[name] = shown(response, show)
            return response

        # No user's token: refused; the open routes stay open.
        await step("no-token", "POST", "/threads/search", body={})
        await step("wrong-token", "POST", "/threads/search", {"Authorization": "Bearer nobody"}, {})
        await step("basic-scheme", "POST", "/threads", {"Authorization": "Basic token-alice"}, {})
        await step("open-ok", "GET", "/ok")
        await step("open-info", "GET", "/info")

        # Alice's thread (the owner she names is not taken), a run of it, and a slow one.
        metadata = lambda b: b["metadata"]  # noqa: E731
        made = await step("alice-create", "POST", "/threads", ALICE, {"metadata": {"k": "v", "owner": "bob"}}, metadata)
        t = made.json()["thread_id"]
        runs = f"/threads/{t}/runs"
        values = lambda b: b  # noqa: E731
        await step("alice-wait", "POST", f"{runs}/wait", ALICE, {"assistant_id": "three", "input": {"log": []}}, values)
        slow = await step("alice-slow", "POST", runs, ALICE, {"assistant_id": "slow", "input": {"delay": 2}}, lambda b: b["status"])
        s = slow.json()["run_id"]

        # Bob, while it runs: nothing of it.
        request = {"assistant_id": "three", "input": {"log": []}}
        for name, method, path, body in [
            ("bob-get-thread", "GET", f"/threads/{t}", None),
            ("bob-patch-thread", "PATCH", f"/threads/{t}", {"metadata": {"owner": "bob"}}),
            ("bob-copy", "POST", f"/threads/{t}/copy", None),
            ("bob-state", "GET", f"/threads/{t}/state", None),
            ("bob-state-at", "GET", f"/threads/{t}/state/1", None),
            ("bob-update-state", "POST", f"/threads/{t}/state", {"values": {"log": ["bob"]}}),
            ("bob-history-get", "GET", f"/threads/{t}/history", None),
            ("bob-history-post", "POST", f"/threads/{t}/history", {}),
            ("bob-list-runs", "GET", runs, None),
            ("bob-get-run", "GET", f"{runs}/{s}", None),
            ("bob-join", "GET", f"{runs}/{s}/join", None),
            ("bob-join-stream", "GET", f"{runs}/{s}/stream", None),
            ("bob-cancel", "POST", f"{runs}/{s}/cancel", None),
            ("bob-cancel-rollback", "POST", f"{runs}/{s}/cancel?action=rollback", None),
            ("bob-run-background", "POST", runs, request),
            ("bob-run-stream", "POST", f"{runs}/stream", request),
            ("bob-run-wait", "POST", f"{runs}/wait", request),
            ("bob-run-if-not-exists", "POST", f"{runs}/wait", {**request, "if_not_exists": "create"}),
            ("bob-create-same-id", "POST", "/threads", {"thread_id": t}),
            ("bob-create-same-id-do-nothing", "POST", "/threads", {"thread_id": t, "if_exists": "do_nothing"}),
            ("bob-delete-run", "DELETE", f"{runs}/{s}", None),
            ("bob-delete-thread", "DELETE", f"/threads/{t}", None),
        ]:
            await step(name, method, path, BOB, body)
        count = lambda b: b if isinstance(b, int) else len(b)  # noqa: E731
        await step("bob-search", "POST", "/threads/search", BOB, {}, count)
        await step("bob-search-ids", "POST", "/threads/search", BOB, {"ids": [t], "metadata": {"owner": "alice"}}, count)
        await step("bob-count", "POST", "/threads/count", BOB, {}, count)

        # Alice's run went on; her thread is hers, a patch does not change its owner, a copy
        # is hers.
        await step("alice-join", "GET", f"{runs}/{s}/join", ALICE, None, values)
        await step("alice-get-thread", "GET", f"/threads/{t}", ALICE, None, metadata)
        await step("alice-list-runs", "GET", runs, ALICE, None, count)
        owner = lambda b: b["metadata"].get("owner")  # noqa: E731
        await step("alice-patch-owner", "PATCH", f"/threads/{t}", ALICE, {"metadata": {"owner": "bob", "p": 2}}, owner)
        copy = await step("alice-copy", "POST", f"/threads/{t}/copy", ALICE, None, owner)
        c = copy.json()["thread_id"]
        await step("bob-state-of-copy", "GET", f"/threads/{c}/state", BOB)
        # Her run names her, not the user its request named.
        config = {"assistant_id": "three", "input": {"log": []}, "config": {"configurable": {"langgraph_auth_user_id": "mallory"}}}
        named = await step("alice-run-named", "POST", runs, ALICE, config, lambda b: b["metadata"].get("owner"))
        await http.get(f"{runs}/{named.json()['run_id']}/join", headers=ALICE)
        user = lambda b: {k: b["kwargs"]["config"]["configurable"].get(k) for k in USER_KEYS}  # noqa: E731
        await step("alice-run-user", "GET", f"{runs}/{named.json()['run_id']}", ALICE, None, user)

        # Bob's own: a thread a run creates, a stateless run; each counts their own.
        own = str(uuid.uuid4())
        await step("bob-run-creates-thread", "POST", f"/threads/{own}/runs/wait", BOB, {**request, "if_not_exists": "create"}, values)
        await step("bob-get-own-thread", "GET", f"/threads/{own}", BOB, None, owner)
        await step("bob-stateless", "POST", "/runs/wait", BOB, request, values)
        await step("bob-count-own", "POST", "/threads/count", BOB, {}, count)
        await step("alice-count-own", "POST", "/threads/count", ALICE, {}, count)
        await step("alice-get-bobs", "GET", f"/threads/{own}", ALICE)

        # The graphs' assistants are everyone's.
        graphs = lambda b: sorted(a["graph_id"] for a in b)  # noqa: E731
        found = await step("bob-assistants", "POST", "/assistants/search", BOB, {}, graphs)
        three = next(a["assistant_id"] for a in found.json() if a["graph_id"] == "three")
        await step("bob-assistant", "GET", f"/assistants/{three}", BOB, None, lambda b: b["graph_id"])
        await step("bob-assistant-graph", "GET", f"/assistants/{three}/graph", BOB, None, lambda b: len(b["nodes"]))

        # Cleaning up: hers to delete, not Bob's.
        await step("alice-delete-bobs", "DELETE", f"/threads/{own}", ALICE)
        await step("alice-delete", "DELETE", f"/threads/{t}", ALICE)
    return steps


def divergences(path):
    """The steps the table of section "Users kept apart" of the divergences file lists."""
    listed, section = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("## "):
            section = line.startswith("## Users kept apart")
        match = re.match(r"^\| `([a-z0-9-]+)` \|", line)
        if match and section:
            listed.add(match.group(1))
    return listed


async def main():
    ours_url, reference_url, path = sys.argv[1:4]
    listed = divergences(path)
    ours, theirs = await asyncio.gather(scenario(ours_url), scenario(reference_url))
    differ = []
    for name in theirs:
        if ours.get(name) == theirs[name]:
            print(f"same {name}")
            continue
        differ.append(name)
        print(f"differs {name}: reference {json.dumps(theirs[name])}, agentstate-server {json.dumps(ours.get(name))}")
    verdict(path, list(theirs), differ, listed, lambda n: n in theirs)


if __name__ == "__main__":
    asyncio.run(main())
