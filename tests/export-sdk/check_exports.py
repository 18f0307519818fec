"""Checks every provider export snapshot against the official Python SDKs' request types.

The snapshots under crates/export/tests/snapshots and crates/cli/tests/snapshots are what
toolgate hands to providers; here each tool in them must validate as the SDK's own type, with no
key the type does not declare:

- openai, openai-strict: openai.types.chat.ChatCompletionFunctionToolParam (and its
  FunctionDefinition);
- openai-responses, openai-responses-strict: openai.types.responses.FunctionToolParam;
- anthropic, anthropic-strict: anthropic.types.ToolParam (strict, input_examples);
- gemini, gemini-json-schema: google.genai.types.Tool (pydantic, extra="forbid"), and every
  parametersJsonSchema/responseJsonSchema as google.genai.types.JSONSchema (extra="forbid";
  Gemini's own propertyOrdering, which the API documents and the type lacks, set aside).

Run by scripts/export-sdk.sh with the pinned SDKs of tests/export-sdk/requirements.txt.
"""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path

from pydantic import TypeAdapter

import anthropic.types
import google.genai.types as genai
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from openai.types.shared_params import FunctionDefinition

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT_DIRS = [
    ROOT / "crates/export/tests/snapshots",
    ROOT / "crates/cli/tests/snapshots",
]


def snapshot_json(path: Path) -> typing.Any:
    """The JSON body of an insta snapshot (after its `---` header)."""
    text = path.read_text()
    _, _, body = text.split("---\n", 2)
    return json.loads(body)


def declared_keys(typed_dict: type) -> set[str]:
    return set(typing.get_type_hints(typed_dict, include_extras=True))


def check_typed_dict(typed_dict: type, value: dict, where: str) -> None:
    TypeAdapter(typed_dict).validate_python(value)
    extra = set(value) - declared_keys(typed_dict)
    assert not extra, f"{where}: keys {sorted(extra)} are not in {typed_dict.__name__}"


def check_openai(tools: list, where: str) -> None:
    for tool in tools:
        at = f"{where} {tool['function']['name']}"
        check_typed_dict(ChatCompletionFunctionToolParam, tool, at)
        check_typed_dict(FunctionDefinition, tool["function"], at)


def check_openai_responses(tools: list, where: str) -> None:
    for tool in tools:
        check_typed_dict(FunctionToolParam, tool, f"{where} {tool['name']}")


def check_anthropic(tools: list, where: str) -> None:
    for tool in tools:
        check_typed_dict(anthropic.types.ToolParam, tool, f"{where} {tool['name']}")


def without_property_ordering(schema: typing.Any) -> typing.Any:
    if isinstance(schema, dict):
        return {
            k: without_property_ordering(v)
            for k, v in schema.items()
            if k != "propertyOrdering"
        }
    if isinstance(schema, list):
        return [without_property_ordering(v) for v in schema]
    return schema


def check_gemini(document: dict, where: str) -> None:
    tool = genai.Tool.model_validate(document)
    for declaration in document["functionDeclarations"]:
        at = f"{where} {declaration['name']}"
        assert not (
            "parameters" in declaration and "parametersJsonSchema" in declaration
        ), f"{at}: parameters and parametersJsonSchema are mutually exclusive"
        for key in ("parametersJsonSchema", "responseJsonSchema"):
            if key in declaration:
                genai.JSONSchema.model_validate(
                    without_property_ordering(declaration[key])
                )
    assert tool.function_declarations is not None


CHECKS = {
    "openai": check_openai,
    "openai-strict": check_openai,
    "openai-responses": check_openai_responses,
    "openai-responses-strict": check_openai_responses,
    "anthropic": check_anthropic,
    "anthropic-strict": check_anthropic,
    "anthropic_strict": check_anthropic,
    "openai_strict": check_openai,
    "gemini": check_gemini,
    "gemini-json-schema": check_gemini,
}


def format_of(path: Path) -> str | None:
    """`snapshots__openai-strict.snap` -> openai-strict; `cli__export_gemini.snap` -> gemini."""
    stem = path.stem
    for prefix in ("snapshots__", "cli__export_"):
        if stem.startswith(prefix):
            return stem[len(prefix) :]
    return None


def main() -> int:
    checked = 0
    for directory in SNAPSHOT_DIRS:
        for path in sorted(directory.glob("*.snap")):
            fmt = format_of(path)
            check = CHECKS.get(fmt or "")
            if check is None:
                continue
            body = snapshot_json(path)
            # The export crate snapshots hold {document, notes}; the CLI ones the document.
            document = body["document"] if isinstance(body, dict) and "document" in body else body
            check(document, path.name)
            checked += 1
            print(f"ok  {path.relative_to(ROOT)} ({fmt})")
    expected = {
        "gemini-json-schema",
        "anthropic-strict",
        "openai-strict",
        "openai-responses-strict",
    }
    seen = {format_of(p) for d in SNAPSHOT_DIRS for p in d.glob("*.snap")}
    missing = expected - seen
    assert not missing, f"no snapshot for {sorted(missing)}"
    print(f"{checked} export snapshots match the official SDK types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
