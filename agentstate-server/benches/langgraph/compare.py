"""agentstate-server against LangGraph's `langgraph dev` (the in-memory LangGraph API server),
both serving the same three-node graph (graph.py here; examples/support/three.rs for
agentstate), driven by the same client (the official Python SDK) on the same machine, in one run.

    python compare.py AGENTSTATE_SERVER_BINARY [--database URL] [--runs N] [--seconds S]

AGENTSTATE_SERVER_BINARY is the `three` example, built with
`cargo build --release -p agentstate-server --example three` (`--features postgres` for a
`postgres://` database). Starts both servers on free loopback ports, then for each:

- first event: `runs.stream` on a new thread, N times in a row; the time from the request to
  its first streamed event (`metadata`), and to the stream's end (p50, p90);
- runs per second: 8 concurrent clients, each creating a thread and waiting for a run on it
  (`runs.wait`), for S seconds.

Prints one table (Markdown) and stops both servers. Needs the packages of ../../tests/reference/requirements.txt
(`langgraph-cli[inmem]` and its pinned dependencies).
"""

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from langgraph_sdk import get_client

HERE = Path(__file__).resolve().parent
CLIENTS = 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_ok(url, process, seconds=120):
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the server at {url} exited with {process.returncode}")
            try:
                if (await http.get(f"{url}/ok")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the server at {url} did not answer /ok within {seconds} s")


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def first_events(url, runs):
    client = get_client(url=url)
    firsts, totals = [], []
    for i in range(runs + 10):
        thread = await client.threads.create()
        start = time.perf_counter()
        first = None
        async for part in client.runs.stream(thread["thread_id"], "three", input={"log": []}):
            if first is None:
                first = time.perf_counter() - start
        total = time.perf_counter() - start
        if i >= 10:  # the first ten warm up
            firsts.append(first)
            totals.append(total)
    return firsts, totals


async def throughput(url, seconds):
    client = get_client(url=url)
    done = 0
    deadline = time.monotonic() + seconds

    async def worker():
        nonlocal done
        while time.monotonic() < deadline:
            thread = await client.threads.create()
            out = await client.runs.wait(thread["thread_id"], "three", input={"log": []})
            assert out["log"] == ["a", "b", "c"], out
            done += 1

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(CLIENTS)))
    return done / (time.monotonic() - start)


async def measure(name, url, args):
    firsts, totals = await first_events(url, args.runs)
    rate = await throughput(url, args.seconds)
    ms = lambda x: f"{x * 1000:.2f} ms"  # noqa: E731
    return (
        f"| {name} | {ms(statistics.median(firsts))} (p90 {ms(quantile(firsts, 0.9))}) "
        f"| {ms(statistics.median(totals))} | {rate:.0f} |",
        statistics.median(firsts),
        rate,
    )


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--database", default=None)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="agentstate-vs-langgraph-"))
    ours_port, theirs_port = free_port(), free_port()
    env = dict(os.environ)
    env["AGENTSTATE_DATABASE"] = args.database or f"sqlite:{work / 'bench.db'}"
    ours = subprocess.Popen(
        [args.binary, f"127.0.0.1:{ours_port}"], env=env, stdout=subprocess.DEVNULL
    )
    langgraph = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    theirs_env = dict(os.environ, LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false")
    theirs = subprocess.Popen(
        [langgraph, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
         "--port", str(theirs_port), "--n-jobs-per-worker", "10",
         "--server-log-level", "WARNING", "--config", str(HERE / "langgraph.json")],
        cwd=HERE, env=theirs_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        ours_url, theirs_url = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{theirs_port}"
        await wait_ok(ours_url, ours)
        await wait_ok(theirs_url, theirs)
        store = "PostgreSQL" if env["AGENTSTATE_DATABASE"].startswith("postgres") else "SQLite"
        row_ours, first_ours, rate_ours = await measure(f"agentstate-server ({store})", ours_url, args)
        row_theirs, first_theirs, rate_theirs = await measure("langgraph dev (in memory)", theirs_url, args)
        print("| server | first event p50 | whole stream p50 | runs/s (8 clients) |")
        print("|---|---|---|---|")
        print(row_ours)
        print(row_theirs)
        print(
            f"\nfirst event: {first_theirs / first_ours:.1f}x sooner; "
            f"runs/s: {rate_ours / rate_theirs:.1f}x LangGraph's"
        )
    finally:
        for process in (ours, theirs):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)


asyncio.run(main())
