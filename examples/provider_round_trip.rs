//! The provider round trip as a library: read the tool calls out of a model's response, run them
//! through toolgate's pipeline, and answer in the provider's own tool-result shape. Here an
//! Anthropic Messages response asks for two calculations at once and for a tool nobody has; the
//! same three steps exist for OpenAI Chat Completions and Responses (`openai_calls`) and Gemini
//! (`gemini_calls`).
//!
//! Run: `cargo run -p toolgate-examples --example provider_round_trip`

use serde_json::json;
use toolgate_export::anthropic_calls;
use toolgate_runtime::{Runtime, RuntimeOptions};
use toolgate_store::DbUrl;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let runtime = Runtime::open(RuntimeOptions {
        db: Some(DbUrl::Sqlite(dir.path().join("toolgate.db"))),
        root: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    })
    .await?;

    // What POST /v1/messages answered (abridged): two parallel calls and one to an unknown tool.
    let response = json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Let me work both out."},
            {"type": "tool_use", "id": "toolu_01", "name": "calculator", "input": {"expression": "17 * 23"}},
            {"type": "tool_use", "id": "toolu_02", "name": "calculator", "input": {"expression": "2^10"}},
            {"type": "tool_use", "id": "toolu_03", "name": "get_weather", "input": {"city": "Oslo"}}
        ]
    });

    // 1. Parse: one ToolCall per tool_use block, in the model's order.
    let calls = anthropic_calls::parse_message(&response)?;
    // 2. Run: read-only calls together, the others one at a time in order; each call is
    //    authorized, validated, approved and audited like any other (set the principal, origin
    //    or approval handler on the request here).
    let outcomes = runtime.run_tool_calls(calls, |request| request).await;
    // 3. Answer: the user message of tool_result blocks (`is_error` on the unknown tool's).
    let message = anthropic_calls::tool_results_message(&outcomes)?;
    println!("{}", serde_json::to_string_pretty(&message)?);

    assert_eq!(message["content"][2]["is_error"], true);
    runtime.drain(std::time::Duration::from_secs(1)).await;
    Ok(())
}
