"""Validates provider request bodies with the official Python SDKs' request types.

Run by `tests/providers_sdk_types.rs` (with the interpreter in AGENTSTATE_SDK_PYTHON, a venv
that `.ci/run` makes with the pinned `anthropic`, `google-genai` and `openai`):

    python validate_provider_bodies.py CASES.jsonl

Each line of CASES.jsonl is `{"name", "provider", "body", "valid"}`: `provider` is
`openai_chat`, `openai_responses`, `anthropic` or `gemini`; `body` a complete request body
(with `model`, and `max_tokens` for Anthropic); `valid` whether the body must pass. A body
passes when the SDK's type takes it without an error and without ignoring a key:

- OpenAI Chat: `openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming`;
- OpenAI Responses: `openai.types.responses.response_create_params.ResponseCreateParamsNonStreaming`;
- Anthropic: `anthropic.types.MessageCreateParamsNonStreaming`;
- Gemini: `contents` as `list[google.genai.types.Content]`; `system_instruction`, `tools` and
  `tool_config` as those fields of `google.genai.types.GenerateContentConfig`, and
  `generation_config` as the rest of it (the REST API's `GenerationConfig` fields, which the
  SDK's config holds beside those three; `generate_content`'s parameters type is private in
  google-genai).

The first three are TypedDicts, which pydantic validates leniently: keys they do not define
are dropped, and `Iterable` fields are validated only when iterated. So the validated value is
walked (which validates every item) and must equal the body: a key the type does not define
makes them differ. The Gemini types are pydantic models that forbid unknown keys.

Prints one line per body whose outcome is not the expected one, then a summary; exits 1 if
there was any.
"""

import json
import sys
from collections.abc import Iterator, Mapping

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from google.genai import types as genai
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter, ValidationError

ADAPTERS = {
    "openai_chat": TypeAdapter(CompletionCreateParamsNonStreaming),
    "openai_responses": TypeAdapter(ResponseCreateParamsNonStreaming),
    "anthropic": TypeAdapter(MessageCreateParamsNonStreaming),
}
GEMINI_CONTENTS = TypeAdapter(list[genai.Content])


def plain(value):
    """The validated value as plain JSON values, iterating (so validating) every iterable."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, Iterator)):
        return [plain(item) for item in value]
    return value


def check(provider, body):
    """None when the body is valid, else the reason."""
    try:
        if provider == "gemini":
            extra = set(body) - {
                "model", "contents", "system_instruction", "tools", "tool_config",
                "generation_config",
            }
            if extra:
                return f"keys a generateContent request does not have: {sorted(extra)}"
            GEMINI_CONTENTS.validate_python(body["contents"])
            config = {
                key: body[key]
                for key in ("system_instruction", "tools", "tool_config")
                if key in body
            }
            generation = body.get("generation_config", {})
            if set(generation) & {"system_instruction", "tools", "tool_config"}:
                return "generation_config holds a key of the request"
            config.update(generation)
            genai.GenerateContentConfig.model_validate(config)
            return None
        validated = plain(ADAPTERS[provider].validate_python(body))
    except ValidationError as error:
        # The error deepest in the body: in a union, the member that came closest.
        deepest = max(error.errors(), key=lambda e: len(e["loc"]))
        where = ".".join(str(part) for part in deepest["loc"])
        return f"{where}: {deepest['msg']} (input {json.dumps(deepest.get('input'))[:300]})"
    except Exception as error:  # a TypeError from a shape the validator cannot walk
        return " ".join(str(error).split())[:600]
    if validated != body:
        return f"the type ignores part of the body: it reads {json.dumps(validated)[:600]}"
    return None


def main():
    failures = 0
    counts = {}
    with open(sys.argv[1], encoding="utf-8") as cases:
        for line in cases:
            case = json.loads(line)
            reason = check(case["provider"], case["body"])
            key = (case["provider"], case["valid"])
            counts[key] = counts.get(key, 0) + 1
            if (reason is None) != case["valid"]:
                failures += 1
                expected = "valid" if case["valid"] else "invalid"
                print(f"{case['name']} / {case['provider']}: expected {expected}; {reason or 'it passed'}")
    summary = ", ".join(f"{p} {'valid' if v else 'broken'}: {n}" for (p, v), n in sorted(counts.items()))
    print(f"{failures} unexpected outcomes ({summary})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
