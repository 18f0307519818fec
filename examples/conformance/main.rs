//! The tools the official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16)
//! calls, served by a real toolgate gateway: text, image, audio, embedded and mixed content,
//! logging, errors, progress, sampling and elicitation, and (for 0.2 under MCP 2026-07-28) the
//! input-required-result tools and the tasks extension's tools (greet, slow_compute,
//! failing_job, protocol_error_job, confirm_delete, multi_input, test_tool_with_task) and the
//! stateless revision's diagnostic tools (test_missing_capability, test_streaming_elicitation,
//! test_logging_tool, test_trigger_tool_change) — every
//! call through the production
//! runtime (`toolgate_runtime::Runtime`, the pipeline `toolgate serve` runs, sandbox executor and
//! policy client included). The binary is its own sandbox launcher (`main` calls
//! `toolgate_sandbox::hidden_main` first).
//!
//! Run: `examples/conformance/serve.sh PORT` (MCP at http://127.0.0.1:PORT/mcp, REST at /v1), or
//! the built binary with `--stdio`. The built-in tools are served too (files jailed to a temp dir).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{
    Category, Content, ElicitAnswer, LogLevel, ParamType, Parameter, Registry, Root,
    SamplingRequest, TaskSupport, Tool, ToolBuilder, ToolError,
};
use toolgate_runtime::{Runtime, RuntimeOptions};
use toolgate_server::{Gateway, ServerOptions};
use toolgate_store::DbUrl;

/// The runtime's registry, for `test_trigger_tool_change` (set once the runtime is open).
static REGISTRY: OnceLock<Arc<Registry>> = OnceLock::new();

/// How many times `test_confirmed_action` has run (its side effect, checked by the interop tests).
static CONFIRMED_RUNS: AtomicU64 = AtomicU64::new(0);

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV file.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

fn tool(name: &str, description: &str) -> ToolBuilder {
    ToolBuilder::new(name, description).category(Category::System)
}

fn tools() -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    tools.push(Arc::new(
        tool(
            "test_simple_text",
            "Returns a simple text response, for testing text content.",
        )
        .handler(|_, _| async { Ok(json!("This is a simple text response for testing.")) }),
    ));
    tools.push(Arc::new(
        tool(
            "test_image_content",
            "Returns a 1x1 PNG image, for testing image content.",
        )
        .handler(|_, ctx| async move {
            ctx.attach(Content::image(PNG, "image/png"));
            Ok(Value::Null)
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_audio_content",
            "Returns a short WAV clip, for testing audio content.",
        )
        .handler(|_, ctx| async move {
            ctx.attach(Content::audio(WAV, "audio/wav"));
            Ok(Value::Null)
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_embedded_resource",
            "Returns an embedded text resource, for testing resource content.",
        )
        .handler(|_, ctx| async move {
            ctx.attach(Content::resource_text(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            ));
            Ok(Value::Null)
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_multiple_content_types",
            "Returns text, an image and a resource together, for testing mixed content.",
        )
        .handler(|_, ctx| async move {
            ctx.attach(Content::text("Multiple content types test:"));
            ctx.attach(Content::image(PNG, "image/png"));
            ctx.attach(Content::resource_text(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            ));
            Ok(Value::Null)
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_tool_with_logging",
            "Sends three log messages while it runs, for testing logging.",
        )
        .handler(|_, ctx| async move {
            ctx.log(LogLevel::Info, "Tool execution started");
            tokio::time::sleep(Duration::from_millis(50)).await;
            ctx.log(LogLevel::Info, "Tool processing data");
            tokio::time::sleep(Duration::from_millis(50)).await;
            ctx.log(LogLevel::Info, "Tool execution completed");
            Ok(json!("Tool with logging executed successfully"))
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_error_handling",
            "Always fails, for testing error results.",
        )
        .handler(|_, _| async {
            Err(ToolError::execution(
                "This tool intentionally returns an error for testing",
            ))
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100, for testing progress notifications.",
        )
        .handler(|_, ctx| async move {
            for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                ctx.report_progress(step, Some(100.0), Some(&format!("Completed step {i} of 2")));
            }
            Ok(json!("Progress test completed"))
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_sampling",
            "Asks the client's model to answer a prompt (sampling), for testing sampling.",
        )
        .param(
            Parameter::new("prompt", ParamType::String)
                .description("The prompt to send")
                .required(),
        )
        .handler(|args, ctx| async move {
            let reply = ctx
                .client("sampling")?
                .sample(SamplingRequest {
                    prompt: args["prompt"].as_str().unwrap_or_default().to_owned(),
                    system_prompt: None,
                    max_tokens: 100,
                })
                .await?;
            Ok(json!(format!("LLM response: {}", reply.text)))
        }),
    ));
    tools.push(Arc::new(
        tool("test_elicitation", "Asks the client's user for a username and email (elicitation), for testing elicitation.")
            .param(Parameter::new("message", ParamType::String).description("What to ask the user").required())
            .handler(|args, ctx| async move {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" }
                    },
                    "required": ["username", "email"]
                });
                let message = args["message"].as_str().unwrap_or_default().to_owned();
                let answer = ctx.client("elicitation")?.elicit(message, schema).await?;
                Ok(json!(describe("User response", &answer)))
            }),
    ));
    tools.push(Arc::new(
        tool("test_elicitation_sep1034_defaults", "Asks for a form whose fields have defaults (SEP-1034), for testing elicitation.")
            .handler(|_, ctx| async move {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "description": "User name", "default": "John Doe" },
                        "age": { "type": "integer", "description": "User age", "default": 30 },
                        "score": { "type": "number", "description": "User score", "default": 95.5 },
                        "status": { "type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active" },
                        "verified": { "type": "boolean", "description": "Verification status", "default": true }
                    },
                    "required": []
                });
                let answer = ctx
                    .client("elicitation")?
                    .elicit("Please review and update the form fields with defaults".into(), schema)
                    .await?;
                Ok(json!(describe("Elicitation completed", &answer)))
            }),
    ));
    tools.push(Arc::new(
        tool("test_elicitation_sep1330_enums", "Asks for a form with every kind of enum field (SEP-1330), for testing elicitation.")
            .handler(|_, ctx| async move {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": { "type": "string", "description": "Choose one", "enum": ["option1", "option2", "option3"] },
                        "titledSingle": { "type": "string", "description": "Choose one (titled)", "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" }
                        ] },
                        "legacyEnum": { "type": "string", "description": "Choose one (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"] },
                        "untitledMulti": { "type": "array", "description": "Choose several", "minItems": 1, "maxItems": 3, "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                        "titledMulti": { "type": "array", "description": "Choose several (titled)", "minItems": 1, "maxItems": 3, "items": { "anyOf": [
                            { "const": "value1", "title": "First Choice" },
                            { "const": "value2", "title": "Second Choice" },
                            { "const": "value3", "title": "Third Choice" }
                        ] } }
                    },
                    "required": []
                });
                let answer = ctx
                    .client("elicitation")?
                    .elicit("Please choose from the enum fields".into(), schema)
                    .await?;
                Ok(json!(describe("Elicitation completed", &answer)))
            }),
    ));
    tools.push(Arc::new(
        tool("test_slow", "Waits the given number of seconds, reporting progress each second; for testing cancellation.")
            .param(Parameter::new("seconds", ParamType::Number).description("How long to wait").required())
            .handler(|args, ctx| async move {
                let seconds = args["seconds"].as_f64().unwrap_or(1.0).clamp(0.0, 120.0);
                let mut waited = 0.0;
                while waited < seconds {
                    ctx.check_cancelled()?;
                    ctx.report_progress(waited, Some(seconds), None);
                    let step = (seconds - waited).min(0.1);
                    tokio::select! {
                        () = ctx.cancellation().cancelled() => return Err(ToolError::cancelled()),
                        () = tokio::time::sleep(Duration::from_secs_f64(step)) => {}
                    }
                    waited += step;
                }
                Ok(json!({ "waited": seconds }))
            }),
    ));
    tools.push(Arc::new(
        tool(
            "test_confirmed_action",
            "Pretends to change something; requires a person's confirmation before it runs.",
        )
        .effect(toolgate_core::Effect::Write)
        .requires_confirmation(true)
        .param(
            Parameter::new("what", ParamType::String)
                .description("What to change")
                .required(),
        )
        .handler(|args, _| async move {
            CONFIRMED_RUNS.fetch_add(1, Ordering::SeqCst);
            Ok(json!({ "done": args["what"] }))
        }),
    ));
    // The tasks extension's fixtures (conformance 0.2, `tasks-*` scenarios): a tool that is never
    // a task, a long one that may be, and one that must be and always fails.
    tools.push(Arc::new(
        tool("greet", "Greets someone by name; never runs as a task.")
            .param(
                Parameter::new("name", ParamType::String)
                    .description("Who to greet")
                    .required(),
            )
            .handler(|args, _| async move {
                Ok(json!(format!(
                    "Hello, {}!",
                    args["name"].as_str().unwrap_or("world")
                )))
            }),
    ));
    tools.push(Arc::new(
        tool("slow_compute", "Sleeps the given seconds, then answers; runs as a task for a client that speaks the tasks extension.")
            .tasks(TaskSupport::Optional)
            .param(Parameter::new("seconds", ParamType::Number).description("How long to sleep").required())
            .param(Parameter::new("label", ParamType::String).description("Echoed in the result"))
            .handler(|args, ctx| async move {
                let seconds = args["seconds"].as_f64().unwrap_or(1.0).clamp(0.0, 120.0);
                tokio::select! {
                    () = ctx.cancellation().cancelled() => return Err(ToolError::cancelled()),
                    () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {}
                }
                let label = args["label"].as_str().unwrap_or("");
                Ok(json!(format!("Computed after {seconds} s {label}").trim_end().to_owned()))
            }),
    ));
    tools.push(Arc::new(
        tool(
            "failing_job",
            "Runs only as a task and always fails after about a second.",
        )
        .tasks(TaskSupport::Required)
        .handler(|_, ctx| async move {
            tokio::select! {
                () = ctx.cancellation().cancelled() => return Err(ToolError::cancelled()),
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            Err(ToolError::execution(
                "failing_job always fails (a conformance fixture)",
            ))
        }),
    ));
    // The suite's protocol-error task: its handler panics. A direct call answers the panic as
    // the tool's failure (an `execution` error result); its task ends `failed` with −32603, the
    // tasks extension's status for a request that produced no result (tasks-lifecycle).
    tools.push(Arc::new(
        tool(
            "protocol_error_job",
            "Runs as a task for a client that speaks the tasks extension; its handler panics.",
        )
        .tasks(TaskSupport::Optional)
        .handler(|_, _| async {
            if std::hint::black_box(true) {
                panic!("protocol_error_job panics (a conformance fixture)");
            }
            Ok(Value::Null)
        }),
    ));
    // Tasks that ask their client (`tasks-mrtr-*`): the question waits in the task
    // (`input_required`, its key in `inputRequests`) until `tasks/update` answers it.
    tools.push(Arc::new(
        tool("confirm_delete", "Asks the client's user to confirm (key confirm_delete), then pretends to delete the file; runs as a task for a client that speaks the tasks extension.")
            .effect(toolgate_core::Effect::Write)
            .tasks(TaskSupport::Optional)
            .param(Parameter::new("filename", ParamType::String).description("The file to delete").required())
            .handler(|args, ctx| async move {
                let file = args["filename"].as_str().unwrap_or_default().to_owned();
                let confirm_form = json!({
                    "type": "object",
                    "properties": { "confirm": { "type": "boolean" } },
                    "required": ["confirm"]
                });
                let answer = ctx
                    .client("elicitation")?
                    .elicit_as("confirm_delete", format!("Delete {file}?"), confirm_form)
                    .await?;
                Ok(json!(match &answer {
                    ElicitAnswer::Accept(content) if content.get("confirm") == Some(&json!(true)) =>
                        format!("Deleted {file} (a conformance fixture: nothing is deleted)"),
                    other => format!("Kept {file}: {}", describe("confirmation", other)),
                }))
            }),
    ));
    tools.push(Arc::new(
        tool("multi_input", "Asks two questions at once (keys user_name and go_ahead); runs as a task for a client that speaks the tasks extension.")
            .tasks(TaskSupport::Optional)
            .handler(|_, ctx| async move {
                let client = ctx.client("elicitation")?;
                let (name, go) = tokio::join!(
                    client.elicit_as("user_name", "What is your name?".into(), name_form()),
                    client.elicit_as("go_ahead", "Go ahead?".into(), ok_form()),
                );
                Ok(json!(format!("{} {}", greeting(&name?), describe("Go ahead", &go?))))
            }),
    ));
    tools.push(Arc::new(
        tool("test_tool_with_task", "Asks the user's name in input-required rounds, then runs as a task (MCP 2026-07-28) and greets them.")
            .tasks(TaskSupport::Required)
            .asks_before_task()
            .handler(|_, ctx| async move {
                let answer = ctx
                    .client("elicitation")?
                    .elicit_as("user_name", "What is your name?".into(), name_form())
                    .await?;
                Ok(json!(greeting(&answer)))
            }),
    ));
    // Input-required results (MCP 2026-07-28, SEP-2322; conformance 0.2 `input-required-result-*`):
    // tools that ask their client through toolgate's client bridge with named questions. Over a
    // session they ask directly; under 2026-07-28 toolgate answers the call with the questions
    // and runs the tool again when the client sends the answers.
    tools.push(asking(
        "test_input_required_result_elicitation",
        "Asks the client's user their name (elicitation, key user_name) and greets them.",
        ("user_name", "What is your name?", name_form()),
        greeting,
    ));
    tools.push(sampling(
        "test_input_required_result_sampling",
        "Asks the client's model the capital of France (sampling, key capital_question).",
    ));
    tools.push(Arc::new(
        tool(
            "test_input_required_result_list_roots",
            "Asks the client for its roots (roots/list, key client_roots) and lists them.",
        )
        .handler(|_, ctx| async move {
            let roots = ctx
                .client("its roots")?
                .list_roots_as("client_roots")
                .await?;
            Ok(json!(describe_roots(&roots)))
        }),
    ));
    tools.push(asking(
        "test_input_required_result_request_state",
        "Asks the client's user to confirm (key confirm_state); its second round runs only with the requestState toolgate issued (state-ok).",
        ("confirm_state", "Please confirm", ok_form()),
        |answer| format!("state-ok: {}", describe("confirmation", answer)),
    ));
    tools.push(asking(
        "test_input_required_result_tampered_state",
        "Asks the client's user to confirm (key confirm_tampered); an altered requestState is refused by toolgate.",
        ("confirm_tampered", "Please confirm", ok_form()),
        |answer| describe("confirmation", answer),
    ));
    tools.push(Arc::new(
        tool(
            "test_input_required_result_multiple_inputs",
            "Asks at once for the user's name, a greeting from the client's model and the client's roots.",
        )
        .handler(|_, ctx| async move {
            let client = ctx.client("its user, model and roots")?;
            let (answer, reply, roots) = tokio::join!(
                client.elicit_as("user_name", "What is your name?".into(), name_form()),
                client.sample_as(
                    "greeting",
                    SamplingRequest {
                        prompt: "Generate a greeting".into(),
                        system_prompt: None,
                        max_tokens: 50,
                    }
                ),
                client.list_roots_as("client_roots"),
            );
            let (answer, reply, roots) = (answer?, reply?, roots?);
            Ok(json!(format!(
                "{} The model says: {}. {}",
                greeting(&answer),
                reply.text,
                describe_roots(&roots)
            )))
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_input_required_result_multi_round",
            "Asks the user's name (step1), then their favourite colour (step2): two rounds of questions.",
        )
        .handler(|_, ctx| async move {
            let client = ctx.client("elicitation")?;
            let name = client
                .elicit_as("step1", "Step 1: What is your name?".into(), name_form())
                .await?;
            let color_form = json!({
                "type": "object",
                "properties": { "color": { "type": "string" } },
                "required": ["color"]
            });
            let color = client
                .elicit_as(
                    "step2",
                    "Step 2: What is your favorite color?".into(),
                    color_form,
                )
                .await?;
            Ok(json!(format!(
                "{} {}",
                greeting(&name),
                describe("Favourite colour", &color)
            )))
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_input_required_result_capabilities",
            "Asks for every kind of input the client declared it can give (elicitation, sampling, roots), and only those.",
        )
        .handler(|_, ctx| async move {
            let client = ctx.client("input")?;
            let mut asked = Vec::new();
            let (answer, reply, roots) = tokio::join!(
                async {
                    if client.can_elicit() {
                        Some(client.elicit_as("user_name", "What is your name?".into(), name_form()).await)
                    } else {
                        None
                    }
                },
                async {
                    if client.can_sample() {
                        Some(client.sample_as("capital_question", capital_question()).await)
                    } else {
                        None
                    }
                },
                async {
                    if client.can_list_roots() {
                        Some(client.list_roots_as("client_roots").await)
                    } else {
                        None
                    }
                },
            );
            if let Some(answer) = answer {
                asked.push(greeting(&answer?));
            }
            if let Some(reply) = reply {
                asked.push(format!("The model answered: {}", reply?.text));
            }
            if let Some(roots) = roots {
                asked.push(describe_roots(&roots?));
            }
            if asked.is_empty() {
                asked.push("The client declared no kind of input, so nothing was asked.".into());
            }
            Ok(json!(asked.join(" ")))
        }),
    ));
    tools.push(Arc::new(
        tool(
            "test_confirmed_action_runs",
            "How many times test_confirmed_action has run in this server, for testing that a refused confirmation runs nothing.",
        )
        .handler(|_, _| async { Ok(json!({ "runs": CONFIRMED_RUNS.load(Ordering::SeqCst) })) }),
    ));
    // The suite's diagnostic tools for revision 2026-07-28 (`server-stateless`).
    tools.push(sampling(
        "test_missing_capability",
        "Asks the client's model a question (sampling): a request whose _meta does not declare the sampling capability is refused with -32021.",
    ));
    tools.push(asking(
        "test_streaming_elicitation",
        "Asks the client's user for a name while the request is open: under 2026-07-28 the question comes back as an input-required result, never as a request of the server's own on the stream.",
        ("user_name", "What is your name?", name_form()),
        greeting,
    ));
    tools.push(Arc::new(
        tool(
            "test_logging_tool",
            "Sends one log message: under 2026-07-28 only to a request whose _meta asks for a logLevel.",
        )
        .handler(|_, ctx| async move {
            ctx.log(LogLevel::Info, "test_logging_tool ran");
            Ok(json!("Logging evaluated"))
        }),
    ));
    tools.push(trigger_tool_change());
    tools.push(Arc::new(
        tool("json_schema_2020_12_tool", "Takes a JSON Schema 2020-12 input with $defs, for testing schema fidelity.")
            .input_schema(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": { "address": { "type": "object", "properties": { "street": { "type": "string" }, "city": { "type": "string" } } } },
                "properties": { "name": { "type": "string" }, "address": { "$ref": "#/$defs/address" } },
                "additionalProperties": false
            }))
            .handler(|args, _| async move { Ok(json!(format!("Received: {args}"))) }),
    ));
    tools
}

/// `test_trigger_tool_change`: replaces its own registration (the same definition), so every
/// client listening for tool list changes is told the list changed.
fn trigger_tool_change() -> Arc<dyn Tool> {
    Arc::new(
        tool(
            "test_trigger_tool_change",
            "Changes the tool list (registers itself again), for testing notifications/tools/list_changed.",
        )
        .handler(|_, _| async {
            let registry = REGISTRY
                .get()
                .ok_or_else(|| ToolError::unavailable("the fixtures' registry is not open yet"))?;
            registry
                .replace(trigger_tool_change())
                .map_err(|e| ToolError::execution(format!("replacing the tool failed: {e}")))?;
            Ok(json!("Mutation triggered"))
        }),
    )
}

/// A tool that asks its client's model the capital of France (key `capital_question`) and
/// answers what the model said.
fn sampling(name: &str, description: &str) -> Arc<dyn Tool> {
    Arc::new(tool(name, description).handler(|_, ctx| async move {
        let reply = ctx
            .client("sampling")?
            .sample_as("capital_question", capital_question())
            .await?;
        Ok(json!(format!("The model answered: {}", reply.text)))
    }))
}

/// A tool that asks its client's user one question (`key`, `message`, `form`) and answers what
/// `render` makes of the answer.
fn asking(
    name: &str,
    description: &str,
    (key, message, form): (&'static str, &'static str, Value),
    render: fn(&ElicitAnswer) -> String,
) -> Arc<dyn Tool> {
    Arc::new(tool(name, description).handler(move |_, ctx| {
        let form = form.clone();
        async move {
            let answer = ctx
                .client("elicitation")?
                .elicit_as(key, message.into(), form)
                .await?;
            Ok(json!(render(&answer)))
        }
    }))
}

/// A form asking for a name.
fn name_form() -> Value {
    json!({
        "type": "object",
        "properties": { "name": { "type": "string" } },
        "required": ["name"]
    })
}

/// A form asking for a yes.
fn ok_form() -> Value {
    json!({
        "type": "object",
        "properties": { "ok": { "type": "boolean" } },
        "required": ["ok"]
    })
}

fn capital_question() -> SamplingRequest {
    SamplingRequest {
        prompt: "What is the capital of France?".into(),
        system_prompt: None,
        max_tokens: 100,
    }
}

/// `Hello, <name>!` for a filled-in name form, else what the user did.
fn greeting(answer: &ElicitAnswer) -> String {
    match answer {
        ElicitAnswer::Accept(content) => match content.get("name").and_then(Value::as_str) {
            Some(name) => format!("Hello, {name}!"),
            None => describe("Name form", answer),
        },
        _ => describe("Name form", answer),
    }
}

fn describe_roots(roots: &[Root]) -> String {
    let listed: Vec<String> = roots
        .iter()
        .map(|r| match &r.name {
            Some(name) => format!("{name} ({})", r.uri),
            None => r.uri.clone(),
        })
        .collect();
    format!("Client roots: {}", listed.join(", "))
}

fn describe(prefix: &str, answer: &ElicitAnswer) -> String {
    match answer {
        ElicitAnswer::Accept(content) => {
            format!(
                "{prefix}: action=accept, content={}",
                Value::Object(content.clone())
            )
        }
        ElicitAnswer::Decline => format!("{prefix}: action=decline"),
        ElicitAnswer::Cancel => format!("{prefix}: action=cancel"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The sandbox's hidden modes first, before any thread starts: the executor re-executes this
    // binary as its launcher (and as a worker running one of these tools, were one isolated).
    if let Some(code) = toolgate_sandbox::hidden_main(tools) {
        std::process::exit(code);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve())
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let arg = std::env::args()
        .nth(1)
        .ok_or("usage: conformance PORT | conformance --stdio")?;
    let dir = tempfile::tempdir()?;
    // The production runtime, as `toolgate serve` opens it (run kinds, the policy client under
    // the default network policy, the sandbox executor with this binary as its launcher, the one
    // pipeline), on a temporary database with the file tools jailed to the same directory.
    let runtime = Runtime::open(RuntimeOptions {
        db: Some(DbUrl::Sqlite(dir.path().join("conformance.db"))),
        root: Some(dir.path().to_path_buf()),
        approval_hint: Some(toolgate_server::approval_hint()),
        ..RuntimeOptions::default()
    })
    .await?;
    runtime.registry().register_all(tools(), false)?;
    let _ = REGISTRY.set(Arc::clone(runtime.registry()));
    let gateway = Gateway::new(runtime, ServerOptions::default())?;
    let shutdown = toolgate_core::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    if arg == "--stdio" {
        gateway.serve_stdio(shutdown).await?;
        return Ok(());
    }
    let port: u16 = arg
        .parse()
        .map_err(|e| format!("PORT must be a number: {e}"))?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("conformance fixtures: MCP at http://127.0.0.1:{port}/mcp");
    gateway.serve_http(listener, shutdown).await?;
    Ok(())
}
