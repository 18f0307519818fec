//! The provider round trip's parsers and formatters on recorded responses
//! (`tests/provider-responses/`): parallel calls, strict-mode nulls, arguments that are not JSON
//! and a tool nobody has, per provider. What is read and what is sent back are snapshots; the
//! same documents through a real runtime and the SDKs' types are `crates/runtime/tests/tool_calls.rs`.
#![cfg(test)]

use std::path::Path;

use serde_json::{Value, json};
use toolgate_core::ToolResult;
use toolgate_export::{
    ArgumentsError, CallsErrorKind, ToolCall, ToolOutcome, anthropic_calls, gemini_calls,
    openai_calls,
};

fn response(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/provider-responses")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// What a parsed call says, as JSON for the snapshots.
fn view(calls: &[ToolCall]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|c| match &c.arguments {
                Ok(args) => json!({"id": c.id, "name": c.name, "arguments": args}),
                Err(e) => json!({"id": c.id, "name": c.name, "argumentsError": e.to_string()}),
            })
            .collect(),
    )
}

/// A result envelope as the pipeline would give it (fixed time and id).
fn envelope(tool: &str, outcome: Value) -> ToolResult {
    let mut wire = json!({
        "tool": tool,
        "callId": "0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
        "fetchedAt": "2026-11-26T12:00:00.000Z",
        "input": {},
        "attempts": 1,
        "durationMs": 0.5,
    });
    for (k, v) in outcome.as_object().unwrap() {
        wire[k] = v.clone();
    }
    serde_json::from_value(wire).unwrap()
}

/// One outcome per call, as the recorded scenario ends: two sums, a write, a read, then the
/// calls that fail (a bad argument, an unknown tool).
fn outcomes(calls: Vec<ToolCall>) -> Vec<ToolOutcome> {
    let results = [
        envelope("calculator", json!({"data": {"result": 391}})),
        envelope("calculator", json!({"data": {"result": 1024}})),
        envelope("write_file", json!({"data": {"bytesWritten": 3}})),
        envelope("read_file", json!({"data": "391"})),
    ];
    calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| {
            let result = match (results.get(i), call.request()) {
                (_, Err(refused)) => *refused,
                (Some(result), Ok(_)) => result.clone(),
                (None, Ok(_)) if call.name == "get_weather" => envelope(
                    "get_weather",
                    json!({"error": "Tool not found: get_weather. List the available tools to find the right name.", "errorKind": "not_found", "attempts": 0}),
                ),
                (None, Ok(_)) => envelope(
                    &call.name,
                    json!({"error": "/expression: 42 is not of type \"string\"", "errorKind": "validation", "attempts": 0}),
                ),
            };
            ToolOutcome { call, result }
        })
        .collect()
}

#[test]
fn openai_chat_completions_round_trip() {
    let calls = openai_calls::parse_chat_completion(&response("openai-chat.json")).unwrap();
    assert_eq!(calls.len(), 6, "every parallel call is read");
    // Strict-mode nulls are kept here: the pipeline drops them against the tool's schema.
    assert_eq!(
        calls[3].arguments.as_ref().unwrap()["encoding"],
        Value::Null
    );
    assert!(matches!(
        calls[4].arguments,
        Err(ArgumentsError::NotJson { .. })
    ));
    insta::assert_json_snapshot!("openai_chat_calls", view(&calls));
    let messages = openai_calls::chat_tool_messages(&outcomes(calls)).unwrap();
    insta::assert_json_snapshot!("openai_chat_results", messages);
}

#[test]
fn openai_responses_round_trip() {
    let calls = openai_calls::parse_responses(&response("openai-responses.json")).unwrap();
    assert_eq!(calls.len(), 6);
    assert_eq!(
        calls[0].id.as_deref(),
        Some("call_Vq3kQ8fZ2hT9mB1xR7nL4cJd"),
        "call_id, not the item id"
    );
    insta::assert_json_snapshot!("openai_responses_calls", view(&calls));
    let items = openai_calls::responses_outputs(&outcomes(calls)).unwrap();
    insta::assert_json_snapshot!("openai_responses_results", items);
}

#[test]
fn anthropic_messages_round_trip() {
    let calls = anthropic_calls::parse_message(&response("anthropic-messages.json")).unwrap();
    assert_eq!(calls.len(), 6, "the text block is not a call");
    insta::assert_json_snapshot!("anthropic_calls", view(&calls));
    let message = anthropic_calls::tool_results_message(&outcomes(calls)).unwrap();
    let flags: Vec<_> = message["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.get("is_error").cloned())
        .collect();
    assert_eq!(
        flags,
        [None, None, None, None, Some(json!(true)), Some(json!(true))],
        "errors, and only errors, are flagged"
    );
    insta::assert_json_snapshot!("anthropic_results", message);
}

#[test]
fn gemini_round_trip() {
    let calls =
        gemini_calls::parse_generate_content(&response("gemini-generate-content.json")).unwrap();
    assert_eq!(calls.len(), 6);
    assert_eq!(calls[0].id.as_deref(), Some("fc-4f1c2a7e"));
    assert_eq!(calls[1].id, None, "Gemini's ids are optional");
    insta::assert_json_snapshot!("gemini_calls", view(&calls));
    let content = gemini_calls::function_responses(&outcomes(calls));
    insta::assert_json_snapshot!("gemini_results", content);
}

#[test]
fn a_text_answer_has_no_calls() {
    let chat = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "391"}, "finish_reason": "stop"}]});
    assert!(
        openai_calls::parse_chat_completion(&chat)
            .unwrap()
            .is_empty()
    );
    let responses = json!({"output": [{"type": "message", "role": "assistant", "content": []}]});
    assert!(
        openai_calls::parse_responses(&responses)
            .unwrap()
            .is_empty()
    );
    let anthropic =
        json!({"content": [{"type": "text", "text": "391"}], "stop_reason": "end_turn"});
    assert!(
        anthropic_calls::parse_message(&anthropic)
            .unwrap()
            .is_empty()
    );
    let gemini =
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "391"}]}}]});
    assert!(
        gemini_calls::parse_generate_content(&gemini)
            .unwrap()
            .is_empty()
    );
    let blocked = json!({"candidates": [{"finishReason": "SAFETY"}]});
    assert!(
        gemini_calls::parse_generate_content(&blocked)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn arguments_that_are_not_an_object_or_absent() {
    let call = ToolCall::from_json_text(Some("c".into()), "calculator".into(), "[1, 2]");
    assert_eq!(
        call.arguments.as_ref().unwrap_err().kind(),
        toolgate_export::ArgumentsErrorKind::NotAnObject
    );
    let refused = call.request().unwrap_err();
    assert_eq!(
        refused.error_kind(),
        Some(toolgate_core::ErrorKind::Validation)
    );
    assert_eq!(
        refused.input,
        json!([1, 2]),
        "the arguments as sent are kept"
    );
    insta::assert_snapshot!("not_an_object", refused.error().unwrap());
    // No arguments at all is an empty object (OpenAI may send "", Gemini leaves `args` out).
    let empty = ToolCall::from_json_text(Some("c".into()), "list".into(), "");
    assert_eq!(empty.request().unwrap().arguments, json!({}));
    let absent = ToolCall::from_json_value(None, "list".into(), Value::Null);
    assert_eq!(absent.request().unwrap().arguments, json!({}));
}

#[test]
fn a_response_of_another_shape_is_an_error_naming_the_place() {
    let cases = [
        openai_calls::parse_chat_completion(&json!({"output": []})).unwrap_err(),
        openai_calls::parse_chat_completion(&json!({"choices": [{"message": {"tool_calls": [{"type": "function", "function": {"name": "x", "arguments": "{}"}}]}}]})).unwrap_err(),
        openai_calls::parse_responses(&json!({"output": [{"type": "function_call", "name": "x", "arguments": "{}"}]})).unwrap_err(),
        anthropic_calls::parse_message(&json!({"content": [{"type": "tool_use", "id": "toolu_1", "input": {}}]})).unwrap_err(),
        gemini_calls::parse_generate_content(&json!({"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]})).unwrap_err(),
        gemini_calls::parse_generate_content(&json!([1])).unwrap_err(),
    ];
    assert!(cases.iter().all(|e| e.kind() == CallsErrorKind::Shape));
    let messages: Vec<String> = cases.iter().map(ToString::to_string).collect();
    insta::assert_json_snapshot!("shape_errors", messages);
}

#[test]
fn a_result_for_a_call_without_id_cannot_go_to_openai_or_anthropic() {
    let call = ToolCall::from_json_text(None, "calculator".into(), "{}");
    let outcome = ToolOutcome {
        result: envelope("calculator", json!({"data": 1})),
        call,
    };
    let outcomes = [outcome];
    let err = openai_calls::chat_tool_messages(&outcomes).unwrap_err();
    assert_eq!(err.kind(), CallsErrorKind::MissingId);
    assert!(anthropic_calls::tool_results_message(&outcomes).is_err());
    assert!(openai_calls::responses_outputs(&outcomes).is_err());
    // Gemini pairs by name: no id is fine.
    let content = gemini_calls::function_responses(&outcomes);
    assert_eq!(
        content["parts"][0]["functionResponse"],
        json!({"name": "calculator", "response": {"output": 1}})
    );
}

/// A 1×1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// The scenario's outcomes with the read (the fourth call) answering with attached blocks: a
/// text, a PNG, a PDF and a text resource, a sound, a TIFF (no provider's image type), a link,
/// and an image meant for the person only (`audience: ["user"]`: not sent to the model).
fn rich_outcomes(calls: Vec<ToolCall>) -> Vec<ToolOutcome> {
    let mut outcomes = outcomes(calls);
    outcomes[3].result = envelope(
        "read_file",
        json!({
            "data": "chart of 391 by month",
            "content": [
                {"type": "text", "text": "The chart shows a peak in March."},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///reports/march.pdf", "mimeType": "application/pdf", "blob": "JVBERi0xLjQK"}},
                {"type": "resource", "resource": {"uri": "file:///reports/notes.txt", "mimeType": "text/plain", "text": "peak: March"}},
                {"type": "audio", "data": "UklGRiQAAABXQVZF", "mimeType": "audio/wav"},
                {"type": "image", "data": "SUkqAA==", "mimeType": "image/tiff"},
                {"type": "resource_link", "uri": "file:///reports/april.csv", "name": "april.csv", "description": "April's figures"},
                {"type": "image", "data": PNG, "mimeType": "image/png", "annotations": {"audience": ["user"]}},
            ],
        }),
    );
    outcomes
}

#[test]
fn attached_blocks_go_back_as_each_provider_takes_them() {
    let chat = openai_calls::parse_chat_completion(&response("openai-chat.json")).unwrap();
    let messages = openai_calls::chat_tool_messages(&rich_outcomes(chat)).unwrap();
    let parts = messages[3]["content"].as_array().unwrap();
    assert!(
        parts.iter().all(|p| p["type"] == "text"),
        "a Chat Completions tool message takes text parts only"
    );
    assert!(
        parts[2]["text"]
            .as_str()
            .unwrap()
            .contains("an image (image/png, 70 bytes), left out")
    );
    assert_eq!(
        parts.len(),
        8,
        "the data and seven blocks; the person's image is not sent"
    );
    assert_eq!(
        messages[0]["content"], "{\"result\":391}",
        "no blocks: one string"
    );
    insta::assert_json_snapshot!("openai_chat_rich_results", messages);

    let responses = openai_calls::parse_responses(&response("openai-responses.json")).unwrap();
    let items = openai_calls::responses_outputs(&rich_outcomes(responses)).unwrap();
    let output = items[3]["output"].as_array().unwrap();
    assert_eq!(output[2]["type"], "input_image");
    assert_eq!(output[3]["type"], "input_file");
    assert_eq!(output[3]["filename"], "march.pdf");
    insta::assert_json_snapshot!("openai_responses_rich_results", items);

    let anthropic = anthropic_calls::parse_message(&response("anthropic-messages.json")).unwrap();
    let message = anthropic_calls::tool_results_message(&rich_outcomes(anthropic)).unwrap();
    let blocks = message["content"][3]["content"].as_array().unwrap();
    let kinds: Vec<_> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "text", "text", "image", "document", "document", "text", "text", "text"
        ]
    );
    insta::assert_json_snapshot!("anthropic_rich_results", message);

    let gemini =
        gemini_calls::parse_generate_content(&response("gemini-generate-content.json")).unwrap();
    let content = gemini_calls::function_responses(&rich_outcomes(gemini));
    let part = &content["parts"][3]["functionResponse"];
    assert_eq!(
        part["parts"].as_array().unwrap().len(),
        2,
        "the PNG and the PDF inline"
    );
    assert_eq!(
        part["response"]["content"][1],
        json!({"$ref": "1-image.png"})
    );
    insta::assert_json_snapshot!("gemini_rich_results", content);
}
