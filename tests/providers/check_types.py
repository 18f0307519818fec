"""Checks toolgate's provider round trip against the official Python SDKs' own types.

Reads one JSON document on stdin: {"provider": P, "response": R, "results": X}, where R is the
recorded provider response the tool calls were read from and X what toolgate formatted as the
answer. Both must validate as the SDK's types:

- openai-chat: R as `ChatCompletion`; the conversation [assistant message of R] + X as a list of
  `ChatCompletionMessageParam`, each of X a `ChatCompletionToolMessageParam`;
- openai-responses: R as `Response`; each of X a `FunctionCallOutput` input item, whose call_ids
  are the function calls' of R;
- anthropic: R as `Message`; [R as an assistant `MessageParam`, X] as `MessageParam`s, X's blocks
  `ToolResultBlockParam`s answering every tool_use of R;
- gemini: R as `GenerateContentResponse`; X as a `Content` (extra fields are refused by the SDK).

A TypedDict accepts keys it does not know, so keys are also checked against the type's own.
Exits 0 and prints "ok" when everything validates, else prints what failed and exits 1.
Run by crates/runtime/tests/tool_calls.rs with the venv scripts/test.sh makes
(.test-deps/provider-venv, tests/providers/requirements.txt).
"""

from __future__ import annotations

import json
import sys
from typing import Any, get_type_hints

from pydantic import TypeAdapter


def known_keys(item: dict[str, Any], typed_dict: Any, where: str) -> None:
    unknown = set(item) - set(get_type_hints(typed_dict))
    if unknown:
        raise ValueError(f"{where}: keys {sorted(unknown)} are not in {typed_dict.__name__}")


def openai_chat(response: Any, results: Any) -> None:
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionMessageParam,
        ChatCompletionToolMessageParam,
    )

    completion = ChatCompletion.model_validate(response)
    assistant = completion.choices[0].message.model_dump(exclude_none=True, exclude={"annotations"})
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python([assistant, *results])
    ids = [c.id for c in completion.choices[0].message.tool_calls or []]
    for i, item in enumerate(results):
        TypeAdapter(ChatCompletionToolMessageParam).validate_python(item)
        known_keys(item, ChatCompletionToolMessageParam, f"results[{i}]")
    answered = [m["tool_call_id"] for m in results]
    if answered != ids:
        raise ValueError(f"tool_call_ids {answered} do not answer the calls {ids} in order")


def openai_responses(response: Any, results: Any) -> None:
    from openai.types.responses import Response, ResponseInputItemParam
    from openai.types.responses.response_input_param import FunctionCallOutput

    parsed = Response.model_validate(response)
    TypeAdapter(list[ResponseInputItemParam]).validate_python(results)
    for i, item in enumerate(results):
        TypeAdapter(FunctionCallOutput).validate_python(item)
        known_keys(item, FunctionCallOutput, f"results[{i}]")
    ids = [o.call_id for o in parsed.output if o.type == "function_call"]
    answered = [item["call_id"] for item in results]
    if answered != ids:
        raise ValueError(f"call_ids {answered} do not answer the calls {ids} in order")


def anthropic(response: Any, results: Any) -> None:
    from anthropic.types import Message, MessageParam, ToolResultBlockParam

    try:  # a TypedDict of its own in newer SDKs, where MessageParam is a union
        from anthropic.types import UserMessageParam as UserMessage
    except ImportError:
        UserMessage = MessageParam

    message = Message.model_validate(response)
    assistant = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]}
    TypeAdapter(list[MessageParam]).validate_python([assistant, results])
    TypeAdapter(UserMessage).validate_python(results)
    known_keys(results, UserMessage, "results")
    if results.get("role") != "user":
        raise ValueError("tool results go back in a user message")
    for i, block in enumerate(results["content"]):
        TypeAdapter(ToolResultBlockParam).validate_python(block)
        known_keys(block, ToolResultBlockParam, f"results.content[{i}]")
    ids = [b.id for b in message.content if b.type == "tool_use"]
    answered = [b["tool_use_id"] for b in results["content"]]
    if answered != ids:
        raise ValueError(f"tool_use_ids {answered} do not answer the calls {ids} in order")


def gemini(response: Any, results: Any) -> None:
    from google.genai import types

    parsed = types.GenerateContentResponse.model_validate(response)
    content = types.Content.model_validate(results)
    calls = [p.function_call for p in parsed.candidates[0].content.parts if p.function_call]
    answers = [p.function_response for p in content.parts or []]
    if any(a is None for a in answers):
        raise ValueError("every part of the answer must be a functionResponse")
    pairs = [(c.name, c.id) for c in calls]
    answered = [(a.name, a.id) for a in answers]
    if answered != pairs:
        raise ValueError(f"function responses {answered} do not answer the calls {pairs} in order")


CHECKS = {
    "openai-chat": openai_chat,
    "openai-responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
}


def main() -> int:
    doc = json.load(sys.stdin)
    try:
        CHECKS[doc["provider"]](doc["response"], doc["results"])
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        print(f"{doc['provider']}: {type(e).__name__}: {e}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
