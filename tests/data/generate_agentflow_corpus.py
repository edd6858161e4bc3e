"""Generates tests/data/agentflow_corpus.json: random messages dumped by the real AgentFlow.

Run with AgentFlow 0.10.1 importable (pydantic 2.14.3). On Python 3.11, where the package's
top level does not import (it needs 3.12), the two message modules are loaded by path:

    python tests/data/generate_agentflow_corpus.py SITE_PACKAGES_DIR > tests/data/agentflow_corpus.json

Each case: `json_string` = `model_dump_json()`; `text` = `text()` of the message read back from
that JSON (what a consumer of the wire sees); `text_of_original` = `text()` of the object before
dumping, which differs only where the dump itself lost information (NaN / infinities -> null).
"""

import importlib.util
import json
import math
import random
import sys
import types
import uuid


def load_agentflow(site):
    base = site + "/agentflow"
    for name in ["agentflow", "agentflow.core", "agentflow.core.state"]:
        mod = types.ModuleType(name)
        mod.__path__ = [base + name[len("agentflow"):].replace(".", "/")]
        sys.modules[name] = mod

    def load(name, path):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    load("agentflow.core.state.message_block", base + "/core/state/message_block.py")
    return load("agentflow.core.state.message", base + "/core/state/message.py").Message


R = random.Random(20261123)
WORDS = ["hello", "Zürich", "naïve", "日本語", "😀 emoji", "tab\there", "line\nbreak", 'quote"s',
         "back\\slash", "ctrl\x01\x1f", "del\x7f", "sep\u2028\u2029", "ÿ", "/slash/", "", "a b c",
         "\u00e9\u0301", "𝄞 clef", "<html>&amp;</html>", "ascii"]


def word():
    return R.choice(WORDS) + (str(R.randint(0, 999)) if R.random() < 0.3 else "")


def number():
    choice = R.random()
    if choice < 0.2:
        return R.randint(-1000, 1000)
    if choice < 0.3:
        return R.choice([2**63, 2**64, -(2**63) - 1, 2**70, -(2**100), 10**30, uuid.uuid4().int])
    if choice < 0.4:
        return R.choice([1e-05, 1e-7, 1.5e-6, 1e16, 1.2345e16, 1e22, -0.0, 0.0, 1.0, 1e300,
                         5e-324, 0.1 + 0.2, 123456789.123, 1e15, 9999999999999998.0])
    if choice < 0.42:
        return R.choice([math.nan, math.inf, -math.inf])
    if choice < 0.6:
        return R.uniform(-1e6, 1e6)
    return R.random() * 10 ** R.randint(-12, 20)


def value(depth=0):
    choice = R.random()
    if depth < 3 and choice < 0.2:
        return obj(depth + 1)
    if depth < 3 and choice < 0.3:
        return [value(depth + 1) for _ in range(R.randint(0, 4))]
    if choice < 0.55:
        return word()
    if choice < 0.85:
        return number()
    return R.choice([True, False, None])


def obj(depth=0):
    keys = ["z", "a", "m", "model", "provider", "é", "日本", "finish_reason", "nested", "Key With Space",
            "b", "_id", "10", "2", "x\ny", "😀"]
    out = {}
    for _ in range(R.randint(0, 5)):
        out[R.choice(keys) + (str(R.randint(0, 9)) if R.random() < 0.3 else "")] = value(depth)
    return out


def maybe(f, p=0.5):
    return f() if R.random() < p else None


def media():
    kind = R.choice(["url", "file_id", "data"])
    m = {"kind": kind}
    if kind == "url":
        m["url"] = "https://example.com/" + str(R.randint(0, 10**6)) + ".png"
    elif kind == "file_id":
        m["file_id"] = "file-" + uuid.UUID(int=R.getrandbits(128)).hex
    else:
        m["data_base64"] = "aGVsbG8="
    for key in ["mime_type", "sha256", "filename"]:
        if R.random() < 0.3:
            m[key] = word()
    for key in ["size_bytes", "width", "height", "duration_ms", "page"]:
        if R.random() < 0.3:
            m[key] = R.randint(0, 2**40)
    return m


def annotation_ref():
    return {k: v for k, v in {"url": maybe(lambda: "https://cite.example/" + word()),
                              "page": maybe(lambda: R.randint(0, 500)),
                              "index": maybe(lambda: R.randint(0, 50)),
                              "title": maybe(word)}.items() if v is not None}


def block():
    kind = R.choice(["text", "text", "text", "image", "audio", "video", "document", "data", "tool_call",
                     "remote_tool_call", "tool_result", "tool_result", "reasoning", "annotation", "error"])
    if kind == "text":
        return {"type": "text", "text": " ".join(word() for _ in range(R.randint(0, 6))),
                "annotations": [annotation_ref() for _ in range(R.choice([0, 0, 0, 1, 2]))]}
    if kind == "image":
        return {"type": "image", "media": media(), "alt_text": maybe(word),
                "bbox": maybe(lambda: [R.choice([R.uniform(0, 1000), float(R.randint(0, 99)), 1e-7, 1e16]) for _ in range(4)])}
    if kind == "audio":
        return {"type": "audio", "media": media(), "transcript": maybe(word),
                "sample_rate": maybe(lambda: R.choice([16000, 44100, 48000])), "channels": maybe(lambda: R.randint(1, 2))}
    if kind == "video":
        return {"type": "video", "media": media(), "thumbnail": maybe(media)}
    if kind == "document":
        return {"type": "document", "media": media(), "text": maybe(word),
                "pages": maybe(lambda: [R.randint(1, 300) for _ in range(R.randint(0, 3))]), "excerpt": maybe(word)}
    if kind == "data":
        return {"type": "data", "mime_type": R.choice(["text/csv", "application/json"]),
                "data_base64": maybe(lambda: "YSxiCg=="), "media": maybe(media)}
    if kind in ("tool_call", "remote_tool_call"):
        b = {"type": kind, "id": "call_" + str(R.randint(0, 10**6)), "name": R.choice(["get_weather", "search", "calc"]),
             "args": obj()}
        if kind == "tool_call":
            b["tool_type"] = R.choice([None, "web_search", "file_search"])
        return b
    if kind == "tool_result":
        return {"type": "tool_result", "call_id": "call_" + str(R.randint(0, 10**6)),
                "output": R.choice([word(), obj(), [value(1) for _ in range(3)], number(), None, True, ""]),
                "is_error": R.random() < 0.2, "status": R.choice([None, "completed", "failed"])}
    if kind == "reasoning":
        return {"type": "reasoning", "summary": word(), "details": maybe(lambda: [word() for _ in range(R.randint(0, 3))])}
    if kind == "annotation":
        return {"type": "annotation", "kind": R.choice(["citation", "note"]),
                "refs": [annotation_ref() for _ in range(R.randint(0, 2))],
                "spans": maybe(lambda: [[R.randint(0, 9), R.randint(10, 99)] for _ in range(R.randint(0, 2))])}
    return {"type": "error", "message": word(), "code": maybe(lambda: R.choice(["429", "E42"])), "data": maybe(obj)}


def tool_call():
    args = json.dumps(obj())
    call_id = "call_" + uuid.UUID(int=R.getrandbits(128)).hex[:24]
    name = R.choice(["get_weather", "search", "calc"])
    order = R.random()
    if order < 0.5:  # the OpenAI SDK's model_dump
        call = {"id": call_id, "function": {"arguments": args, "name": name}, "type": "function"}
    elif order < 0.8:  # hand-written / other converters
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
    else:  # streamed deltas carry an index
        call = {"index": R.randint(0, 3), "id": call_id, "function": {"arguments": args, "name": name}, "type": "function"}
    return call


def usages():
    u = {"completion_tokens": R.randint(0, 5000), "prompt_tokens": R.randint(0, 50000)}
    u["total_tokens"] = u["completion_tokens"] + u["prompt_tokens"]
    for key in ["reasoning_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]:
        if R.random() < 0.5:
            u[key] = R.randint(0, 1000)
    for key in ["image_tokens", "audio_tokens"]:
        if R.random() < 0.5:
            u[key] = R.choice([None, R.randint(0, 100)])
    return u


def message_id():
    choice = R.random()
    if choice < 0.4:
        return str(uuid.UUID(int=R.getrandbits(128), version=4))
    if choice < 0.7:
        return uuid.UUID(int=R.getrandbits(128)).int >> 64  # AgentFlow's "bigint" ids
    if choice < 0.8:
        return R.randint(-(2**63), 2**63)
    if choice < 0.9:
        return R.choice([-(2**63) - 1, -(2**64), 2**100, -(2**130), 10**40, 0, 1])
    return str(R.randint(0, 10**6))


def timestamp():
    choice = R.random()
    if choice < 0.8:
        return 1.7e9 + R.random() * 1e8
    return R.choice([None, 1700000000, 0.0, 1e16, 1e-7, 12.5])


def message():
    m = {"message_id": message_id(), "role": R.choice(["user", "assistant", "system", "tool"]),
         "content": [block() for _ in range(R.choice([0, 1, 1, 1, 2, 3]))],
         "delta": R.random() < 0.1, "reasoning": maybe(word, 0.2), "timestamp": timestamp(),
         "metadata": obj() if R.random() < 0.6 else {}, "usages": maybe(usages, 0.3),
         "raw": maybe(obj, 0.2), "parsed_content": maybe(obj, 0.15)}
    if m["role"] == "assistant" and R.random() < 0.5:
        m["tools_calls"] = [tool_call() for _ in range(R.randint(0, 3))]
    return m


def main():
    Message = load_agentflow(sys.argv[1])
    cases = []
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    while len(cases) < count:
        original = Message.model_validate(message())
        dumped = original.model_dump_json()
        back = Message.model_validate_json(dumped)
        cases.append({"json_string": dumped, "text": back.text(), "text_of_original": original.text()})
    json.dump({"generator": "tests/data/generate_agentflow_corpus.py", "package": "10xscale-agentflow 0.10.1",
               "pydantic": "2.14.3", "messages": cases}, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


main()
