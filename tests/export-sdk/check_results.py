"""Checks the provider round trip's answers against the official Python SDKs' own types.

For each provider, the recorded response the tool calls were read from
(crates/export/tests/provider-responses/) and every snapshot of toolgate's answer to it — the
runtime's end to end (crates/runtime/tests/snapshots/tool_calls__*.snap) and the formatter's
(crates/export/tests/snapshots/provider_calls__*_results.snap) — must validate as the SDK's types,
the answer pairing every call in the model's order (the `*_rich_results` snapshots answer with a
result's attached blocks: text, image, PDF, text resource, and notes for what a provider does not
take):

- openai-chat: the response as `ChatCompletion`; [its assistant message] + the answer as a list
  of `ChatCompletionMessageParam`, each of the answer a `ChatCompletionToolMessageParam`;
- openai-responses: the response as `Response`; each item a `FunctionCallOutput` input item;
- anthropic: the response as `Message`; [it as an assistant message, the answer] as
  `MessageParam`s, the answer a `UserMessageParam` of `ToolResultBlockParam`s;
- gemini: the response as `GenerateContentResponse`; the answer as a `Content` (the SDK refuses
  extra fields), `functionResponse` parts with the calls' names and ids.

A TypedDict accepts keys it does not declare, so keys are also checked against the type's own.
Run by scripts/export-sdk.sh with the pinned SDKs of tests/export-sdk/requirements.txt.
"""

from __future__ import annotations

import json
import sys
from typing import Any, get_type_hints

from pydantic import TypeAdapter

from check_exports import ROOT, snapshot_json


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
        if isinstance(item["content"], list):  # attached blocks: text parts only
            from openai.types.chat import ChatCompletionContentPartTextParam

            for j, part in enumerate(item["content"]):
                if part.get("type") != "text":
                    raise ValueError(f"results[{i}].content[{j}]: a tool message takes text parts only")
                TypeAdapter(ChatCompletionContentPartTextParam).validate_python(part)
                known_keys(part, ChatCompletionContentPartTextParam, f"results[{i}].content[{j}]")
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
        if isinstance(item["output"], list):  # attached blocks: input_text/_image/_file
            from openai.types.responses import (
                ResponseInputFileContentParam,
                ResponseInputImageContentParam,
                ResponseInputTextContentParam,
            )

            kinds = {
                "input_text": ResponseInputTextContentParam,
                "input_image": ResponseInputImageContentParam,
                "input_file": ResponseInputFileContentParam,
            }
            for j, part in enumerate(item["output"]):
                TypeAdapter(kinds[part["type"]]).validate_python(part)
                known_keys(part, kinds[part["type"]], f"results[{i}].output[{j}]")
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
        if isinstance(block.get("content"), list):  # attached blocks: text, image, document
            from anthropic.types import DocumentBlockParam, ImageBlockParam, TextBlockParam

            kinds = {"text": TextBlockParam, "image": ImageBlockParam, "document": DocumentBlockParam}
            for j, inner in enumerate(block["content"]):
                # Iterable fields are validated lazily by pydantic: check each block itself.
                TypeAdapter(kinds[inner["type"]]).validate_python(inner)
                known_keys(inner, kinds[inner["type"]], f"results.content[{i}].content[{j}]")
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
    for a in answers:  # attached media: inline data the response's content references
        names = {p.inline_data.display_name for p in a.parts or [] if p.inline_data}
        refs = {c["$ref"] for c in (a.response or {}).get("content", []) if isinstance(c, dict)}
        if names != refs:
            raise ValueError(f"{a.name}: inline parts {sorted(names)} do not match the references {sorted(refs)}")
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


RESPONSES = {
    "openai-chat": "openai-chat.json",
    "openai-responses": "openai-responses.json",
    "anthropic": "anthropic-messages.json",
    "gemini": "gemini-generate-content.json",
}
SNAPSHOTS = {
    "openai-chat": ("openai_chat", "openai_chat_results"),
    "openai-responses": ("openai_responses", "openai_responses_results"),
    "anthropic": ("anthropic", "anthropic_results"),
    "gemini": ("gemini", "gemini_results"),
}


def main() -> int:
    checked = 0
    for provider, check in CHECKS.items():
        response = json.loads((ROOT / "crates/export/tests/provider-responses" / RESPONSES[provider]).read_text())
        runtime, export = SNAPSHOTS[provider]
        paths = [
            ROOT / f"crates/runtime/tests/snapshots/tool_calls__{runtime}.snap",
            ROOT / f"crates/export/tests/snapshots/provider_calls__{export}.snap",
            # The same answers with a result's attached blocks (image, PDF, text, …).
            ROOT / f"crates/export/tests/snapshots/provider_calls__{export.removesuffix('_results')}_rich_results.snap",
        ]
        for path in paths:
            try:
                check(response, snapshot_json(path))
            except Exception as e:  # noqa: BLE001 - every failure is reported the same way
                print(f"FAIL {path.relative_to(ROOT)} ({provider}): {type(e).__name__}: {e}")
                return 1
            checked += 1
            print(f"ok  {path.relative_to(ROOT)} ({provider})")
    print(f"{checked} round-trip answers match the official SDK types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
