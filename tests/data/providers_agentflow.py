"""Writes tests/data/providers_agentflow.json: AgentFlow 0.10.1's own request conversions of
real and random conversations, for the differential test `tests/providers_differential.rs`.

Run from the repository root with AgentFlow installed (and google-genai for its Gemini builder):

    python3 -m venv /tmp/af && /tmp/af/bin/pip install 10xscale-agentflow==0.10.1 google-genai
    /tmp/af/bin/python tests/data/providers_agentflow.py ../shared/wire/agentflow-messages.json

Each case holds the input messages (AgentFlow's model_dump) and what AgentFlow builds from them:
`openai_chat` (utils.converter.convert_messages), `openai_responses` (the `input`/`instructions`
passed to responses.create), `anthropic` (split_system, merge_tool_results,
drop_trailing_assistant) and `gemini` (_convert_to_google_format, dumped as JSON), or the
error AgentFlow raised. External URLs are never fetched: the Gemini builder's fetch is made
to fail at once (so AgentFlow sends "[Failed to load image]").
"""

import asyncio
import base64
import json
import random
import sys
import urllib.request

from agentflow.core.graph.agent_internal import anthropic_request as anth
from agentflow.core.graph.agent_internal.google import AgentGoogleMixin
from agentflow.core.graph.agent_internal.openai import AgentOpenAIMixin
from agentflow.core.state.message import Message
from agentflow.utils.converter import convert_messages


def no_network(*args, **kwargs):
    raise OSError("no network in the differential")


urllib.request.urlopen = no_network


def chat(messages):
    return convert_messages(system_prompts=[], state=None, extra_messages=messages)


def anthropic(chat_messages):
    system, rest = anth.split_system(chat_messages)
    rest = anth.merge_tool_results(rest)
    rest = anth.drop_trailing_assistant(rest)
    body = {"messages": rest}
    if system:
        body["system"] = system
    return body


def gemini(chat_messages):
    system, contents = AgentGoogleMixin()._convert_to_google_format(chat_messages)
    body = {"contents": [c.model_dump(mode="json", exclude_none=True) for c in contents]}
    for content in body["contents"]:
        for part in content.get("parts", []):
            # google-genai dumps bytes as URL-safe base64; the API takes standard base64.
            for key in ("thought_signature",):
                if key in part:
                    part[key] = base64.b64encode(base64.urlsafe_b64decode(part[key])).decode()
            inline = part.get("inline_data")
            if inline and "data" in inline:
                inline["data"] = base64.b64encode(base64.urlsafe_b64decode(inline["data"])).decode()
    if system is not None:
        body["system_instruction"] = {"parts": [{"text": system}]}
    return body


class FakeResponses:
    def __init__(self):
        self.kwargs = None

    async def create(self, **kwargs):
        self.kwargs = kwargs
        return None


class FakeClient:
    def __init__(self):
        self.responses = FakeResponses()


class ResponsesAgent(AgentOpenAIMixin):
    def __init__(self):
        self.llm_kwargs = {}
        self.reasoning_config = None
        self.model = "m"
        self.client = FakeClient()


def responses(chat_messages):
    agent = ResponsesAgent()
    asyncio.run(agent._call_openai_responses(chat_messages, stream=False))
    kwargs = agent.client.responses.kwargs
    body = {"input": kwargs["input"]}
    if "instructions" in kwargs:
        body["instructions"] = kwargs["instructions"]
    return body


def run(fn, arg):
    try:
        return {"ok": json.loads(json.dumps(fn(arg)))}
    except Exception as e:  # noqa: BLE001 - recorded as AgentFlow's behaviour
        return {"error": f"{type(e).__name__}: {e}"}


def media(kind, **fields):
    base = {"kind": kind}
    base.update(fields)
    return base


TS = 1700000000.0


def msg(mid, role, content, **extra):
    m = {"message_id": mid, "role": role, "content": content, "timestamp": TS}
    m.update(extra)
    return m


WORDS = ["Paris", "météo", "ok", "42", "日本", "rain", "é\"q\"", "line\nbreak", "🙂", "x"]


def text(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def args(rng):
    choices = [
        {},
        {"city": text(rng)},
        {"n": rng.randint(-5, 1000), "f": rng.choice([1.5, 2.0, 1e-05])},
        {"nested": {"list": [1, "two", None, True]}, "b": False},
    ]
    return rng.choice(choices)


def output(rng):
    return rng.choice(
        [text(rng), {"temp": rng.randint(0, 30), "unit": "C"}, [1, {"x": "é"}], None, 3, 1.0, "", {"k": [2.5e-07, True]}]
    )


def random_conversation(rng, n):
    """A conversation as agents build them: system prompts (one sometimes in the middle), user
    turns with media, assistant turns with reasoning and parallel tool calls answered by tool
    messages (some failed), sometimes a final assistant message."""
    out = []
    ids = iter(range(10_000))

    def nid():
        return f"m{next(ids)}"

    if rng.random() < 0.7:
        out.append(msg(nid(), "system", [{"type": "text", "text": "Be " + text(rng)}]))
    if rng.random() < 0.2:
        out.append(msg(nid(), "system", [{"type": "text", "text": "Also " + text(rng)}]))
    turns = rng.randint(1, n)
    for t in range(turns):
        blocks = [{"type": "text", "text": text(rng)}]
        r = rng.random()
        if r < 0.15:
            blocks.append({"type": "image", "media": media("url", url=f"https://img.example/{t}.png", mime_type="image/png")})
        elif r < 0.25:
            blocks.append({"type": "image", "media": media("data", data_base64="iVBORw0KGgo=", mime_type="image/png")})
        elif r < 0.3:
            blocks.append({"type": "audio", "media": media("data", data_base64="UklGRg==", mime_type="audio/wav")})
        elif r < 0.35:
            blocks.append({"type": "text", "text": text(rng)})
        elif r < 0.38:
            blocks.append({"type": "text", "text": ""})
            blocks.append({"type": "image", "media": media("data", data_base64="R0lGODlh")})
        elif r < 0.41:
            blocks.append({"type": "image", "media": media("url", url="data:image/jpeg;base64,/9j/4A==")})
        elif r < 0.44:
            blocks.append({"type": "audio", "media": media("data", data_base64="SUQz", mime_type="audio/mp3")})
        out.append(msg(nid(), "user", blocks))
        if rng.random() < 0.05 and t > 0:
            out.append(msg(nid(), "system", [{"type": "text", "text": "Now " + text(rng)}]))
        # assistant: tool rounds then a final answer
        for _round in range(rng.choice([0, 0, 1, 1, 2])):
            calls = []
            content = []
            if rng.random() < 0.3:
                content.append({"type": "reasoning", "summary": text(rng), "details": None})
            if rng.random() < 0.5:
                content.append({"type": "text", "text": text(rng)})
                if rng.random() < 0.2:
                    content.append({"type": "text", "text": text(rng)})
            blockless = rng.random() < 0.2  # calls only in tools_calls
            for _ in range(rng.choice([1, 1, 2, 3])):
                cid = f"call_{next(ids)}"
                a = args(rng)
                name = rng.choice(["get_weather", "search", "lookup"])
                calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}})
                if not blockless:
                    content.append({"type": "tool_call", "id": cid, "name": name, "args": a})
            out.append(msg(nid(), "assistant", content, tools_calls=calls))
            for call in calls:
                is_error = rng.random() < 0.15
                result = {"type": "tool_result", "call_id": call["id"], "output": output(rng),
                          "is_error": is_error, "status": "failed" if is_error else "completed"}
                tool_blocks = [result]
                if rng.random() < 0.1:
                    tool_blocks.append({"type": "text", "text": " (" + text(rng) + ")"})
                out.append(msg(nid(), "tool", tool_blocks))
        final = []
        if rng.random() < 0.2:
            final.append({"type": "reasoning", "summary": text(rng), "details": [text(rng)]})
        final.append({"type": "text", "text": text(rng)})
        if t < turns - 1 or rng.random() < 0.3:
            out.append(msg(nid(), "assistant", final, delta=rng.random() < 0.05))
    return out


def corner_cases():
    """Hand-written conversations for the differences the random ones do not reach."""
    call = {"id": "functions.get_weather:0", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
    ask = msg("c0", "user", [{"type": "text", "text": "Weather in Paris?"}])
    calling = msg("c1", "assistant", [{"type": "tool_call", "id": call["id"], "name": "get_weather",
                                       "args": {"city": "Paris"}}], tools_calls=[call])
    chart = [{"type": "text", "text": "The chart:"},
             {"type": "image", "media": media("data", data_base64="iVBORw0KGgo=", mime_type="image/png")}]
    return [
        {"name": "case:user_after_tool_results", "messages": [
            ask, calling,
            msg("c2", "tool", [{"type": "tool_result", "call_id": call["id"], "output": "Sunny"}]),
            msg("c3", "user", [{"type": "text", "text": "And tomorrow?"}]),
        ]},
        {"name": "case:file_ids", "messages": [
            msg("c0", "user", [{"type": "text", "text": "Compare"},
                               {"type": "image", "media": media("file_id", file_id="file-img-1", mime_type="image/png")},
                               {"type": "document", "media": media("file_id", file_id="file-doc-1", mime_type="application/pdf")}]),
        ]},
        {"name": "case:tool_output_blocks", "messages": [
            ask, calling,
            msg("c2", "tool", [{"type": "tool_result", "call_id": call["id"], "output": chart}]),
        ]},
        {"name": "case:only_system", "messages": [
            msg("c0", "system", [{"type": "text", "text": "Be brief."}]),
        ]},
    ]


def main():
    wire = json.load(open(sys.argv[1]))["messages"]
    dumps = [w["dump"] for w in wire]
    cases = []
    # Each real message alone, then the whole list as one conversation.
    for d in dumps:
        cases.append({"name": f"wire:{d['message_id']}", "messages": [d]})
    cases.append({"name": "wire:all", "messages": dumps})
    rng = random.Random(12)
    for i in range(60):
        messages = random_conversation(rng, 4)
        cases.append({"name": f"random:{i}", "messages": messages})
    cases.extend(corner_cases())
    for case in cases:
        models = [Message.model_validate(m) for m in case["messages"]]
        case["messages"] = [json.loads(m.model_dump_json()) for m in models]
        converted = chat(models)
        case["openai_chat"] = run(lambda c: {"messages": c}, converted)
        case["openai_responses"] = run(responses, converted)
        case["anthropic"] = run(anthropic, converted)
        case["gemini"] = run(gemini, converted)
    out = {
        "generator": "tests/data/providers_agentflow.py",
        "package": "10xscale-agentflow 0.10.1",
        "cases": cases,
    }
    with open("tests/data/providers_agentflow.json", "w") as f:
        json.dump(out, f, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
