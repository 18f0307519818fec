#!/usr/bin/env bash
# Checks the provider export snapshots (crates/export/tests/snapshots, crates/cli/tests/snapshots)
# against the official Python SDKs' request types (tests/export-sdk/check_exports.py): OpenAI
# Chat Completions and Responses tools, Anthropic ToolParam (strict, input_examples), Gemini Tool
# and JSONSchema; then the provider round trip's answers (tests/export-sdk/check_results.py: the
# tool-result snapshots of crates/runtime/tests/tool_calls.rs and
# crates/export/tests/provider_calls.rs, with the recorded responses they answer). Installs the
# pinned SDKs (tests/export-sdk/requirements.txt) into target/export-sdk-venv once; later runs
# work offline.
# Usage: scripts/export-sdk.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/venv.sh
source scripts/venv.sh
pinned_venv "target/export-sdk-venv" "tests/export-sdk/requirements.txt" openai anthropic google.genai

export PYTHONDONTWRITEBYTECODE=1
timeout -k 10 300 "$py" tests/export-sdk/check_exports.py </dev/null
exec timeout -k 10 300 "$py" tests/export-sdk/check_results.py </dev/null
