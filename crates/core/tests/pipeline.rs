//! The call pipeline end to end: resolve, authorize, validate (with defaults), approval, rate
//! limits, timeouts, cancellation, retries, output checks and truncation, panics, isolation,
//! observers, redaction, typed tools, factories and the tool context.
#![cfg(test)]

use std::io::{Cursor, Write};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use toolgate_core::{
    ApprovalHandler, ApprovalRequest, AutoDeny, BoxFuture, CANCELLED_MESSAGE, CallObserver,
    CallRecord, CallRequest, CancellationToken, Constraints, Content, Decision, Effect, ErrorKind,
    Extensions, HttpClient, HttpRequest, HttpResponse, Isolation, ParamType, Parameter, Permission,
    Pipeline, PipelineBuilder, PreApproved, Principal, PrincipalId, ProgressSink, PromptApproval,
    RateLimit, RateLimitStage, Registry, RetryPolicy, RunSpec, Tool, ToolBuilder, ToolContext,
    ToolDefinition, ToolError, ToolName, ToolOutput, ToolResult,
};

// ---- helpers --------------------------------------------------------------------------------

const DESCRIPTION: &str = "A tool used by the pipeline tests. Use it in tests only.";

fn builder(name: &str) -> ToolBuilder {
    ToolBuilder::new(name, DESCRIPTION)
}

fn echo(name: &str) -> Arc<dyn Tool> {
    Arc::new(
        builder(name)
            .input_schema(json!({"type": "object"}))
            .handler(|args, _| async move { Ok(args) }),
    )
}

fn weather() -> ToolBuilder {
    builder("get_weather")
        .param(
            Parameter::new("city", ParamType::String)
                .description("City name")
                .required(),
        )
        .param(
            Parameter::new("units", ParamType::String)
                .description("Unit system")
                .one_of(vec![json!("metric"), json!("imperial")])
                .default_value(json!("metric")),
        )
        .param(
            Parameter::new("days", ParamType::Array)
                .description("Days ahead")
                .schema(json!({"items": {"type": "integer", "minimum": 0}, "maxItems": 3})),
        )
}

fn registry(tools: Vec<Arc<dyn Tool>>) -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    registry.register_all(tools, false).unwrap();
    registry
}

fn pipeline(tools: Vec<Arc<dyn Tool>>) -> Pipeline {
    Pipeline::new(registry(tools))
}

fn constraints(f: impl FnOnce(&mut Constraints)) -> Constraints {
    let mut c = Constraints::default();
    f(&mut c);
    c
}

fn principal(id: &str) -> Principal {
    Principal::new(PrincipalId::parse(id).unwrap())
}

fn kind(result: &ToolResult) -> Option<ErrorKind> {
    result.error_kind()
}

/// Awaits a call that must end on its own (timeout, cancellation); with the clock paused, a call
/// that never ends fails the test after a virtual day instead of hanging it.
async fn bounded<F: std::future::Future>(call: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(24 * 3600), call)
        .await
        .expect("the call never finished")
}

/// Sets a flag when dropped: proves a handler future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Remembers the cancellation token a handler was given.
type TokenSlot = Arc<Mutex<Option<CancellationToken>>>;

/// A handler that never finishes on its own; records its token, start and drop.
fn hanging(
    name: &str,
    c: Constraints,
) -> (
    Arc<dyn Tool>,
    TokenSlot,
    Arc<AtomicBool>,
    Arc<tokio::sync::Notify>,
) {
    let slot: TokenSlot = Arc::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let tool = {
        let (slot, dropped, started) = (slot.clone(), dropped.clone(), started.clone());
        builder(name).constraints(c).handler(move |_, ctx| {
            let (slot, dropped, started) = (slot.clone(), dropped.clone(), started.clone());
            async move {
                let _guard = DropFlag(dropped);
                *slot.lock().unwrap() = Some(ctx.cancellation().clone());
                started.notify_one();
                std::future::pending::<()>().await;
                Ok(json!("unreachable"))
            }
        })
    };
    (Arc::new(tool), slot, dropped, started)
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(ToolResult, Option<String>, String)>>);

impl CallObserver for Recorder {
    fn on_call<'a>(&'a self, record: &'a CallRecord<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.0.lock().unwrap().push((
                record.result.clone(),
                record.spec.map(|s| s.name().to_string()),
                record.principal.id.to_string(),
            ));
        })
    }
}

/// A shared buffer usable as the prompt's output.
#[derive(Clone, Default)]
struct SharedOut(Arc<Mutex<Vec<u8>>>);

impl Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedOut {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

// ---- resolve, authorize, validate -----------------------------------------------------------

#[tokio::test]
async fn unknown_tool_is_not_found() {
    let p = pipeline(vec![echo("get_weather")]);
    let r = p
        .call(CallRequest::new("get_wether", json!({"a": 1})))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::NotFound));
    let msg = r.error().unwrap();
    assert!(msg.contains("get_wether"), "{msg}");
    assert!(msg.contains("Did you mean get_weather?"), "{msg}");
    assert_eq!(r.tool, "get_wether");
    assert_eq!(r.input, json!({"a": 1}));
    assert_eq!(r.attempts, 0);

    let r = p
        .call(CallRequest::new("Totally Different!", Value::Null))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::NotFound));
    assert!(!r.error().unwrap().contains("Did you mean"));
    assert_eq!(r.tool, "Totally Different!");
}

#[tokio::test]
async fn a_withheld_tool_is_unavailable_with_its_reason_to_those_who_may_call_it() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = {
        let calls = calls.clone();
        move || -> Arc<dyn Tool> {
            let calls = calls.clone();
            Arc::new(builder("files__read").handler(move |_, _| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("read")) }
            }))
        }
    };
    let reg = registry(vec![counted(), echo("other_tool")]);
    let p = Pipeline::new(Arc::clone(&reg));
    let reason = "Tool files__read is quarantined: its description changed since it was approved; approve the new version with `toolgate servers approve files read`";
    reg.withhold(&ToolName::parse("files__read").unwrap(), reason)
        .unwrap();

    let r = p.call(CallRequest::new("files__read", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Unavailable));
    assert_eq!(r.error(), Some(reason));
    assert_eq!(r.attempts, 0);
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // To a principal that may not call it, it does not exist (the same not-found as any name).
    let r = p
        .call(
            CallRequest::new("files__read", json!({}))
                .principal(Principal::local().only_tools(["other_tool"])),
        )
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::NotFound));
    assert!(!r.error().unwrap().contains("quarantined"));

    // Registered again (approved): callable.
    reg.register(counted()).unwrap();
    let r = p.call(CallRequest::new("files__read", json!({}))).await;
    assert!(r.is_ok(), "{:?}", r.error());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn authorization_checks_permissions_and_allowed_tools() {
    let calls = Arc::new(AtomicU32::new(0));
    let tool = {
        let calls = calls.clone();
        builder("get_weather")
            .permission("tool.weather.read")
            .permission("tool.network.fetch")
            .handler(move |_, _| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("sunny")) }
            })
    };
    let p = pipeline(vec![Arc::new(tool), echo("other_tool")]);
    let grant = |s: &str| Permission::parse(s).unwrap();
    let cases: Vec<(&str, Principal, &str, Option<ErrorKind>)> = vec![
        (
            "no grants",
            principal("ann"),
            "get_weather",
            Some(ErrorKind::Authorization),
        ),
        (
            "one of two grants",
            principal("ann").grant(grant("tool.weather.read")),
            "get_weather",
            Some(ErrorKind::Authorization),
        ),
        (
            "both grants",
            principal("ann")
                .grant(grant("tool.weather.read"))
                .grant(grant("tool.network.fetch")),
            "get_weather",
            None,
        ),
        (
            "wildcard grant",
            principal("ann").grant(grant("tool.*")),
            "get_weather",
            None,
        ),
        (
            "everything",
            principal("ann").grant(grant("*")),
            "get_weather",
            None,
        ),
        (
            "wrong prefix",
            principal("ann").grant(grant("tool.weather.*")),
            "get_weather",
            Some(ErrorKind::Authorization),
        ),
        ("local operator", Principal::local(), "get_weather", None),
        (
            "not in the allowed tools: not found, as if it did not exist",
            Principal::local().only_tools(["other_tool"]),
            "get_weather",
            Some(ErrorKind::NotFound),
        ),
        (
            "in the allowed tools",
            Principal::local().only_tools(["get_weather"]),
            "get_weather",
            None,
        ),
        (
            "allowed tools and no permission needed",
            principal("bob").only_tools(["other_tool"]),
            "other_tool",
            None,
        ),
        (
            "empty allowed tools",
            Principal::local().only_tools(Vec::<String>::new()),
            "other_tool",
            Some(ErrorKind::NotFound),
        ),
    ];
    let mut expected_calls = 0;
    for (label, who, tool, want) in cases {
        let r = p
            .call(CallRequest::new(tool, json!({})).principal(who))
            .await;
        assert_eq!(kind(&r), want, "{label}: {:?}", r.error());
        if want.is_none() && tool == "get_weather" {
            expected_calls += 1;
        }
        if let Some(msg) = r.error() {
            assert!(msg.contains(tool), "{label}: {msg}");
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), expected_calls);
    // The message names the missing permission(s).
    let r = p
        .call(CallRequest::new("get_weather", json!({})).principal(principal("ann")))
        .await;
    let msg = r.error().unwrap();
    assert!(
        msg.contains("tool.weather.read, tool.network.fetch"),
        "{msg}"
    );
    assert!(msg.contains("ann"), "{msg}");
}

#[tokio::test]
async fn authorization_comes_before_validation() {
    let p = pipeline(vec![Arc::new(
        weather()
            .permission("tool.weather.read")
            .handler(|_, _| async { Ok(json!(1)) }),
    )]);
    let r = p
        .call(CallRequest::new("get_weather", json!({"city": 5})).principal(principal("ann")))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::Authorization));
}

#[tokio::test]
async fn validation_lists_every_violation_with_its_path() {
    let calls = Arc::new(AtomicU32::new(0));
    let tool = {
        let calls = calls.clone();
        weather().handler(move |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!(1)) }
        })
    };
    let p = pipeline(vec![Arc::new(tool)]);
    let r = p
        .call(CallRequest::new(
            "get_weather",
            json!({"units": "kelvin", "days": [1, -1, "x", 2], "extra": true}),
        ))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::Validation));
    let msg = r.error().unwrap();
    assert!(
        msg.starts_with("Invalid arguments for get_weather: "),
        "{msg}"
    );
    let problems: Vec<&str> = msg
        .trim_start_matches("Invalid arguments for get_weather: ")
        .split("; ")
        .collect();
    // Missing city, extra property, units not in enum, days[1] < 0, days[2] not an integer,
    // too many days.
    let at = |prefix: &str| problems.iter().filter(|p| p.starts_with(prefix)).count();
    assert!(at("(root): ") >= 2, "{problems:?}");
    assert!(msg.contains("city"), "{msg}");
    assert!(msg.contains("extra"), "{msg}");
    assert_eq!(at("/units: "), 1, "{problems:?}");
    assert_eq!(at("/days/1: "), 1, "{problems:?}");
    assert_eq!(at("/days/2: "), 1, "{problems:?}");
    assert_eq!(at("/days: "), 1, "{problems:?}");
    assert_eq!(problems.len(), 6, "{problems:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(r.attempts, 0);

    // Arguments that are not an object at all.
    let r = p.call(CallRequest::new("get_weather", json!([1, 2]))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Validation));
    assert!(r.error().unwrap().contains("(root)"));
}

#[tokio::test]
async fn defaults_are_applied_and_echoed_in_input() {
    let seen = Arc::new(Mutex::new(Value::Null));
    let tool = {
        let seen = seen.clone();
        weather().handler(move |args, _| {
            *seen.lock().unwrap() = args.clone();
            async { Ok(json!({"temperature": 3.5})) }
        })
    };
    let p = pipeline(vec![Arc::new(tool)]);
    let r = p
        .call(CallRequest::new("get_weather", json!({"city": "Oslo"})))
        .await;
    assert!(r.is_ok(), "{:?}", r.error());
    let want = json!({"city": "Oslo", "units": "metric"});
    assert_eq!(*seen.lock().unwrap(), want);
    assert_eq!(r.input, want);
    assert_eq!(r.data(), Some(&json!({"temperature": 3.5})));
    assert_eq!(r.attempts, 1);

    // Given values are kept; null arguments count as an empty object.
    let r = p
        .call(CallRequest::new(
            "get_weather",
            json!({"city": "Oslo", "units": "imperial"}),
        ))
        .await;
    assert_eq!(r.input, json!({"city": "Oslo", "units": "imperial"}));

    // `null` for an optional parameter means absent (OpenAI strict mode sends it for omitted
    // ones): the default applies, or the argument goes away; a required one stays invalid.
    let cases: Vec<(Value, Option<Value>)> = vec![
        (
            json!({"city": "Oslo", "units": null}),
            Some(json!({"city": "Oslo", "units": "metric"})),
        ),
        (
            json!({"city": "Oslo", "days": null}),
            Some(json!({"city": "Oslo", "units": "metric"})),
        ),
        (json!({"city": null}), None),
        (json!({"city": "Oslo", "units": null, "extra": null}), None),
    ];
    for (args, want) in cases {
        let r = p.call(CallRequest::new("get_weather", args.clone())).await;
        match want {
            Some(input) => {
                assert!(r.is_ok(), "{args}: {:?}", r.error());
                assert_eq!(r.input, input, "{args}");
                assert_eq!(*seen.lock().unwrap(), input, "{args}");
            }
            None => assert_eq!(kind(&r), Some(ErrorKind::Validation), "{args}"),
        }
    }

    let p = pipeline(vec![Arc::new(
        builder("no_args")
            .param(
                Parameter::new("n", ParamType::Integer)
                    .description("N")
                    .default_value(json!(7)),
            )
            .handler(|args, _| async move { Ok(args) }),
    )]);
    let r = p.call(CallRequest::new("no_args", Value::Null)).await;
    assert_eq!(r.data(), Some(&json!({"n": 7})));
    assert_eq!(r.input, json!({"n": 7}));
}

// ---- approval -------------------------------------------------------------------------------

fn confirm_tool(calls: Arc<AtomicU32>) -> Arc<dyn Tool> {
    Arc::new(
        builder("delete_file")
            .effect(Effect::Delete)
            .requires_confirmation(true)
            .param(
                Parameter::new("path", ParamType::String)
                    .description("Path")
                    .required(),
            )
            .param(
                Parameter::new("token", ParamType::String)
                    .description("Token")
                    .sensitive(),
            )
            .handler(move |_, _| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("deleted")) }
            }),
    )
}

fn prompt(answer: &str) -> (Arc<dyn ApprovalHandler>, SharedOut) {
    let out = SharedOut::default();
    let handler = PromptApproval::new(
        Box::new(Cursor::new(answer.as_bytes().to_vec())),
        Box::new(out.clone()),
    );
    (Arc::new(handler), out)
}

#[tokio::test]
async fn approval_handlers_decide() {
    let cases: Vec<(&str, Arc<dyn ApprovalHandler>, Option<ErrorKind>)> = vec![
        (
            "auto-deny",
            Arc::new(AutoDeny::default()),
            Some(ErrorKind::ConfirmationRequired),
        ),
        ("pre-approved", Arc::new(PreApproved), None),
        ("prompt y", prompt("y\n").0, None),
        ("prompt yes", prompt("yes\n").0, None),
        ("prompt Y with spaces", prompt("  Y  \r\n").0, None),
        ("prompt n", prompt("n\n").0, Some(ErrorKind::Rejected)),
        ("prompt no", prompt("no\n").0, Some(ErrorKind::Rejected)),
        ("prompt enter", prompt("\n").0, Some(ErrorKind::Rejected)),
        (
            "prompt yes please",
            prompt("yes please\n").0,
            Some(ErrorKind::Rejected),
        ),
        (
            "prompt end of input",
            prompt("").0,
            Some(ErrorKind::Rejected),
        ),
    ];
    for (label, handler, want) in cases {
        let calls = Arc::new(AtomicU32::new(0));
        let p = PipelineBuilder::new(registry(vec![confirm_tool(calls.clone())]))
            .approval(handler)
            .build();
        let r = p
            .call(CallRequest::new("delete_file", json!({"path": "/tmp/x"})))
            .await;
        assert_eq!(kind(&r), want, "{label}: {:?}", r.error());
        assert_eq!(
            calls.load(Ordering::SeqCst),
            u32::from(want.is_none()),
            "{label}"
        );
        if want.is_none() {
            assert_eq!(r.data(), Some(&json!("deleted")), "{label}");
        }
    }
}

#[tokio::test]
async fn approval_messages_and_prompt_text() {
    let calls = Arc::new(AtomicU32::new(0));
    let p = PipelineBuilder::new(registry(vec![confirm_tool(calls.clone())]))
        .approval(Arc::new(AutoDeny::new("re-run with --yes")))
        .build();
    let r = p
        .call(CallRequest::new("delete_file", json!({"path": "/x"})))
        .await;
    let msg = r.error().unwrap();
    assert!(
        msg.contains("delete_file") && msg.contains("re-run with --yes"),
        "{msg}"
    );

    let (handler, out) = prompt("n\n");
    let r = p
        .call(
            CallRequest::new("delete_file", json!({"path": "/x", "token": "s3cret"}))
                .approval(handler),
        )
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::Rejected));
    assert!(r.error().unwrap().contains("declined"), "{:?}", r.error());
    let shown = out.text();
    assert!(shown.contains("delete_file"), "{shown}");
    assert!(shown.contains("[y/N]"), "{shown}");
    assert!(shown.contains("/x"), "{shown}");
    assert!(!shown.contains("s3cret"), "sensitive value shown: {shown}");
    assert!(shown.contains("[REDACTED]"), "{shown}");

    let (handler, _) = prompt("");
    let r = p
        .call(CallRequest::new("delete_file", json!({"path": "/x"})).approval(handler))
        .await;
    assert!(
        r.error().unwrap().contains("end of input"),
        "{:?}",
        r.error()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

struct Recording {
    decision: Decision,
    seen: Mutex<Vec<(String, String, Value, String)>>,
}

impl ApprovalHandler for Recording {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        self.seen.lock().unwrap().push((
            request.spec.name().to_string(),
            request.principal.id.to_string(),
            request.arguments.clone(),
            request.call_id.to_string(),
        ));
        let decision = self.decision.clone();
        Box::pin(async move { decision })
    }
}

#[tokio::test]
async fn per_request_approval_overrides_the_default() {
    let calls = Arc::new(AtomicU32::new(0));
    let reg = registry(vec![confirm_tool(calls.clone()), echo("harmless")]);
    let deny_by_default = Pipeline::new(Arc::clone(&reg));
    let r = deny_by_default
        .call(
            CallRequest::new("delete_file", json!({"path": "/x"})).approval(Arc::new(PreApproved)),
        )
        .await;
    assert!(r.is_ok(), "{:?}", r.error());

    let approve_by_default = PipelineBuilder::new(Arc::clone(&reg))
        .approval(Arc::new(PreApproved))
        .build();
    let r = approve_by_default
        .call(
            CallRequest::new("delete_file", json!({"path": "/x"}))
                .approval(Arc::new(AutoDeny::default())),
        )
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::ConfirmationRequired));
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // The handler sees the tool, the principal, the call id and redacted arguments; a reason
    // given by a person ends up in the error.
    let recording = Arc::new(Recording {
        decision: Decision::Denied {
            reason: Some("too risky today".into()),
        },
        seen: Mutex::default(),
    });
    let request = CallRequest::new("delete_file", json!({"path": "/x", "token": "t0k"}))
        .principal(principal("ann"))
        .approval(recording.clone());
    let call_id = request.call_id.to_string();
    let r = approve_by_default.call(request).await;
    assert_eq!(kind(&r), Some(ErrorKind::Rejected));
    assert!(r.error().unwrap().contains("too risky today"));
    let seen = recording.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "delete_file".to_owned(),
            "ann".to_owned(),
            json!({"path": "/x", "token": "[REDACTED]"}),
            call_id
        )]
    );

    // Tools that need no confirmation never ask.
    let asked = Arc::new(Recording {
        decision: Decision::Approved,
        seen: Mutex::default(),
    });
    let r = deny_by_default
        .call(CallRequest::new("harmless", json!({})).approval(asked.clone()))
        .await;
    assert!(r.is_ok());
    assert!(asked.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn safety_level_dangerous_requires_approval() {
    let mut def = ToolDefinition::new("drop_table", DESCRIPTION);
    def.safety_level = Some(toolgate_core::SafetyLevel::Dangerous);
    let tool = ToolBuilder::from_definition(def).handler(|_, _| async { Ok(json!("dropped")) });
    let p = pipeline(vec![Arc::new(tool)]);
    let r = p.call(CallRequest::new("drop_table", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::ConfirmationRequired));
    let r = p
        .call(CallRequest::new("drop_table", json!({})).approval(Arc::new(PreApproved)))
        .await;
    assert_eq!(r.data(), Some(&json!("dropped")));
}

// ---- timeout and cancellation ---------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn timeout_fires_and_cancels_the_handler() {
    let (tool, slot, dropped, _) = hanging("slow_tool", constraints(|c| c.timeout_ms = Some(1000)));
    let p = pipeline(vec![tool]);
    let started = tokio::time::Instant::now();
    let r = bounded(p.call(CallRequest::new("slow_tool", json!({})))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Timeout));
    let msg = r.error().unwrap();
    assert!(
        msg.contains("slow_tool") && msg.contains("1000 ms"),
        "{msg}"
    );
    // Virtual time: the timeout fired at exactly the configured limit.
    assert_eq!(started.elapsed(), Duration::from_millis(1000));
    assert!(dropped.load(Ordering::SeqCst), "handler future dropped");
    let token = slot.lock().unwrap().clone().unwrap();
    assert!(token.is_cancelled(), "the handler's token fired");
    // Timeouts are not retried, even for an idempotent, retryable tool.
    assert_eq!(r.attempts, 1);
}

#[tokio::test(start_paused = true)]
async fn timeout_is_observable_by_watching_the_token() {
    let watched = Arc::new(AtomicBool::new(false));
    let tool = {
        let watched = watched.clone();
        builder("watcher")
            .constraints(constraints(|c| c.timeout_ms = Some(2000)))
            .handler(move |_, ctx| {
                let watched = watched.clone();
                let token = ctx.cancellation().clone();
                tokio::spawn(async move {
                    token.cancelled().await;
                    watched.store(true, Ordering::SeqCst);
                });
                async move {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(json!("late"))
                }
            })
    };
    let p = pipeline(vec![Arc::new(tool)]);
    let r = bounded(p.call(CallRequest::new("watcher", json!({})))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Timeout));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(watched.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn default_timeout_is_fifteen_seconds() {
    let (tool, _, _, _) = hanging("slow_tool", Constraints::default());
    let p = pipeline(vec![tool]);
    let started = tokio::time::Instant::now();
    let r = bounded(p.call(CallRequest::new("slow_tool", json!({})))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Timeout));
    assert_eq!(started.elapsed(), Duration::from_secs(15));
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_request_stops_the_handler() {
    let (tool, slot, dropped, started) = hanging("slow_tool", Constraints::default());
    let p = pipeline(vec![tool]);
    let token = CancellationToken::new();
    let request = CallRequest::new("slow_tool", json!({})).cancel_token(token.clone());
    let (r, ()) = tokio::join!(bounded(p.call(request)), async {
        // Bounded too: if the handler never starts, the test fails instead of hanging.
        let _ = tokio::time::timeout(Duration::from_secs(60), started.notified()).await;
        token.cancel();
    });
    assert_eq!(kind(&r), Some(ErrorKind::Cancelled));
    assert_eq!(r.error(), Some("Request was cancelled"));
    assert_eq!(CANCELLED_MESSAGE, "Request was cancelled");
    assert!(dropped.load(Ordering::SeqCst), "handler future dropped");
    assert!(slot.lock().unwrap().clone().unwrap().is_cancelled());
    assert_eq!(r.attempts, 1);
}

#[tokio::test]
async fn a_request_cancelled_before_it_starts_never_runs() {
    let calls = Arc::new(AtomicU32::new(0));
    let tool = {
        let calls = calls.clone();
        builder("counted").handler(move |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!(1)) }
        })
    };
    let p = pipeline(vec![Arc::new(tool)]);
    let token = CancellationToken::new();
    token.cancel();
    let r = p
        .call(CallRequest::new("counted", json!({})).cancel_token(token))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::Cancelled));
    assert_eq!(r.error(), Some(CANCELLED_MESSAGE));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

struct NeverAnswers;

impl ApprovalHandler for NeverAnswers {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn cancellation_reaches_every_stage() {
    // While waiting for approval.
    let calls = Arc::new(AtomicU32::new(0));
    let p = PipelineBuilder::new(registry(vec![confirm_tool(calls.clone())]))
        .approval(Arc::new(NeverAnswers))
        .build();
    let token = CancellationToken::new();
    let canceller = {
        let token = token.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            token.cancel();
        }
    };
    let (r, ()) = tokio::join!(
        bounded(p.call(CallRequest::new("delete_file", json!({"path": "/x"})).cancel_token(token))),
        canceller
    );
    assert_eq!(kind(&r), Some(ErrorKind::Cancelled));
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // While waiting between retries.
    let tool = {
        let calls = calls.clone();
        builder("flaky").handler(move |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(ToolError::unavailable("down")) }
        })
    };
    let p = PipelineBuilder::new(registry(vec![Arc::new(tool)]))
        .retry_policy(RetryPolicy {
            base: Duration::from_secs(60),
            max: Duration::from_secs(60),
        })
        .build();
    let token = CancellationToken::new();
    let canceller = {
        let token = token.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            token.cancel();
        }
    };
    let (r, ()) = tokio::join!(
        bounded(p.call(CallRequest::new("flaky", json!({})).cancel_token(token))),
        canceller
    );
    assert_eq!(kind(&r), Some(ErrorKind::Cancelled));
    assert_eq!(r.error(), Some(CANCELLED_MESSAGE));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(r.attempts, 1);
}

#[tokio::test]
async fn handlers_can_check_for_cancellation_themselves() {
    let tool = builder("checker").handler(|_, ctx| async move {
        ctx.check_cancelled()?;
        Ok(json!({"cancelled": ctx.is_cancelled()}))
    });
    let p = pipeline(vec![Arc::new(tool)]);
    let r = p.call(CallRequest::new("checker", json!({}))).await;
    assert_eq!(r.data(), Some(&json!({"cancelled": false})));
    let ctx = ToolContext::detached(
        toolgate_core::ToolName::parse("checker").unwrap(),
        Principal::local(),
    );
    ctx.cancellation().cancel();
    let err = ctx.check_cancelled().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), CANCELLED_MESSAGE);
}

// ---- retries --------------------------------------------------------------------------------

type Failure = fn() -> ToolError;

fn failing_tool(
    name: &str,
    effect: Option<Effect>,
    idempotent: Option<bool>,
    c: Constraints,
    fail: Failure,
    succeed_on: Option<u32>,
    attempts_seen: Arc<Mutex<Vec<u32>>>,
) -> Arc<dyn Tool> {
    let mut b = builder(name).constraints(c);
    if let Some(e) = effect {
        b = b.effect(e);
    }
    if let Some(i) = idempotent {
        b = b.idempotent(i);
    }
    Arc::new(b.handler(move |_, ctx| {
        attempts_seen.lock().unwrap().push(ctx.attempt());
        let ok = succeed_on.is_some_and(|n| ctx.attempt() >= n);
        async move {
            if ok {
                Ok(json!({"attempt": ctx.attempt()}))
            } else {
                Err(fail())
            }
        }
    }))
}

#[tokio::test(start_paused = true)]
async fn retries_follow_idempotence_retryability_and_max_attempts() {
    struct Row {
        label: &'static str,
        effect: Option<Effect>,
        idempotent: Option<bool>,
        constraints: Constraints,
        fail: Failure,
        succeed_on: Option<u32>,
        attempts: u32,
        ok: bool,
    }
    let unavailable: Failure = || ToolError::unavailable("backend down");
    let rows = vec![
        Row {
            label: "retryable error, idempotent read tool, default 3 attempts",
            effect: None,
            idempotent: None,
            constraints: Constraints::default(),
            fail: unavailable,
            succeed_on: None,
            attempts: 3,
            ok: false,
        },
        Row {
            label: "max_attempts 5",
            effect: Some(Effect::Read),
            idempotent: None,
            constraints: constraints(|c| c.max_attempts = Some(5)),
            fail: unavailable,
            succeed_on: None,
            attempts: 5,
            ok: false,
        },
        Row {
            label: "max_attempts 1",
            effect: None,
            idempotent: None,
            constraints: constraints(|c| c.max_attempts = Some(1)),
            fail: unavailable,
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
        Row {
            label: "success on the 2nd attempt",
            effect: None,
            idempotent: None,
            constraints: Constraints::default(),
            fail: unavailable,
            succeed_on: Some(2),
            attempts: 2,
            ok: true,
        },
        Row {
            label: "success on the last attempt",
            effect: None,
            idempotent: None,
            constraints: constraints(|c| c.max_attempts = Some(4)),
            fail: unavailable,
            succeed_on: Some(4),
            attempts: 4,
            ok: true,
        },
        Row {
            label: "rate_limited errors are retryable too",
            effect: None,
            idempotent: None,
            constraints: Constraints::default(),
            fail: || ToolError::new(ErrorKind::RateLimited, "slow down"),
            succeed_on: None,
            attempts: 3,
            ok: false,
        },
        Row {
            label: "execution error marked retryable",
            effect: None,
            idempotent: None,
            constraints: Constraints::default(),
            fail: || ToolError::execution("flaky").retryable(),
            succeed_on: None,
            attempts: 3,
            ok: false,
        },
        Row {
            label: "write tool is not idempotent",
            effect: Some(Effect::Write),
            idempotent: None,
            constraints: Constraints::default(),
            fail: unavailable,
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
        Row {
            label: "side-effect tool is not idempotent",
            effect: Some(Effect::SideEffect),
            idempotent: None,
            constraints: Constraints::default(),
            fail: unavailable,
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
        Row {
            label: "write tool declared idempotent",
            effect: Some(Effect::Write),
            idempotent: Some(true),
            constraints: Constraints::default(),
            fail: unavailable,
            succeed_on: None,
            attempts: 3,
            ok: false,
        },
        Row {
            label: "read tool declared not idempotent",
            effect: None,
            idempotent: Some(false),
            constraints: Constraints::default(),
            fail: unavailable,
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
        Row {
            label: "constraints.retryable = false",
            effect: None,
            idempotent: None,
            constraints: constraints(|c| c.retryable = Some(false)),
            fail: unavailable,
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
        Row {
            label: "permanent error",
            effect: None,
            idempotent: None,
            constraints: Constraints::default(),
            fail: || ToolError::unavailable("gone").permanent(),
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
        Row {
            label: "plain execution error",
            effect: None,
            idempotent: None,
            constraints: Constraints::default(),
            fail: || ToolError::execution("bad input file"),
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
        Row {
            label: "validation error from the tool",
            effect: None,
            idempotent: None,
            constraints: Constraints::default(),
            fail: || ToolError::validation("no such city"),
            succeed_on: None,
            attempts: 1,
            ok: false,
        },
    ];
    for row in rows {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tool = failing_tool(
            "flaky",
            row.effect,
            row.idempotent,
            row.constraints.clone(),
            row.fail,
            row.succeed_on,
            seen.clone(),
        );
        let p = pipeline(vec![tool]);
        let r = p.call(CallRequest::new("flaky", json!({}))).await;
        assert_eq!(r.attempts, row.attempts, "{}: {:?}", row.label, r.error());
        assert_eq!(r.is_ok(), row.ok, "{}", row.label);
        let want: Vec<u32> = (1..=row.attempts).collect();
        assert_eq!(*seen.lock().unwrap(), want, "{}: ctx.attempt()", row.label);
        if row.ok {
            assert_eq!(
                r.data(),
                Some(&json!({"attempt": row.attempts})),
                "{}",
                row.label
            );
        } else {
            assert_eq!(kind(&r), Some((row.fail)().kind()), "{}", row.label);
            assert_eq!(r.error(), Some((row.fail)().message()), "{}", row.label);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially_with_jitter() {
    let times = Arc::new(Mutex::new(Vec::new()));
    let tool = {
        let times = times.clone();
        builder("flaky")
            .constraints(constraints(|c| c.max_attempts = Some(5)))
            .handler(move |_, _| {
                times.lock().unwrap().push(tokio::time::Instant::now());
                async { Err(ToolError::unavailable("down")) }
            })
    };
    let policy = RetryPolicy {
        base: Duration::from_secs(1),
        max: Duration::from_secs(3),
    };
    let p = PipelineBuilder::new(registry(vec![Arc::new(tool)]))
        .retry_policy(policy)
        .build();
    let r = p.call(CallRequest::new("flaky", json!({}))).await;
    assert_eq!(r.attempts, 5);
    let times = times.lock().unwrap().clone();
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // Exponential (1 s, 2 s, then capped at 3 s), each jittered to 50-100%.
    let full = [1.0, 2.0, 3.0, 3.0];
    for (gap, full) in gaps.iter().zip(full) {
        let secs = gap.as_secs_f64();
        // (The timer wheel rounds deadlines up to the next millisecond.)
        assert!(secs >= full * 0.5 && secs <= full + 0.002, "{gaps:?}");
    }
    assert_eq!(gaps.len(), 4);
    // The policy itself.
    for attempt in 1..=20 {
        for seed in [0u64, 1, 42, u64::MAX] {
            let d = policy.delay(attempt, seed);
            let full = (1u64 << (attempt - 1).min(16)).min(3);
            let full = Duration::from_secs(full);
            assert!(
                d >= full / 2 && d <= full,
                "attempt {attempt} seed {seed}: {d:?}"
            );
        }
    }
}

// ---- output -----------------------------------------------------------------------------------

fn returning(name: &str, value: Value, c: Constraints) -> Arc<dyn Tool> {
    Arc::new(builder(name).constraints(c).handler(move |_, _| {
        let value = value.clone();
        async move { Ok(value) }
    }))
}

#[tokio::test]
async fn large_output_is_truncated_on_a_char_boundary() {
    let cap = constraints(|c| c.max_output_bytes = Some(1024));
    let cases: Vec<(&str, String)> = vec![
        ("two-byte chars", format!("a{}", "é".repeat(600))),
        ("three-byte chars", format!("ab{}", "€".repeat(400))),
        ("four-byte chars", format!("a{}", "😀".repeat(300))),
        (
            "four-byte chars, offset 2",
            format!("ab{}", "😀".repeat(300)),
        ),
        ("ascii", "x".repeat(5000)),
    ];
    for (label, text) in cases {
        let p = pipeline(vec![returning("big", json!(text), cap.clone())]);
        let r = p.call(CallRequest::new("big", json!({}))).await;
        assert!(r.truncated, "{label}");
        let cut = r.data().unwrap().as_str().unwrap();
        assert!(cut.len() <= 1024, "{label}: {}", cut.len());
        assert!(text.starts_with(cut), "{label}: not a prefix");
        // Nothing more would fit: the next char crosses the limit.
        let next = text[cut.len()..].chars().next().unwrap();
        assert!(cut.len() + next.len_utf8() > 1024, "{label}: cut too early");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["truncated"], json!(true), "{label}");
    }
}

#[tokio::test]
async fn output_within_the_limit_is_untouched() {
    let cap = constraints(|c| c.max_output_bytes = Some(1024));
    let exact = "é".repeat(512);
    assert_eq!(exact.len(), 1024);
    for value in [
        json!(exact),
        json!(null),
        json!(12345),
        json!(true),
        json!({"a": [1, 2]}),
    ] {
        let p = pipeline(vec![returning("fits", value.clone(), cap.clone())]);
        let r = p.call(CallRequest::new("fits", json!({}))).await;
        assert!(!r.truncated, "{value}");
        assert_eq!(r.data(), Some(&value));
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("truncated").is_none());
    }
}

#[tokio::test]
async fn attached_content_shares_the_output_limit() {
    // 1 KiB limit; data `{"n":1}` is 7 bytes, so 1017 bytes are left for content.
    let tool = Arc::new(
        builder("pictures")
            .constraints(constraints(|c| c.max_output_bytes = Some(1024)))
            .handler(|_, ctx| async move {
                ctx.attach(Content::text("a".repeat(500)));
                ctx.attach(Content::image("b".repeat(500), "image/png"));
                ctx.attach(Content::audio("c".repeat(100), "audio/wav"));
                ctx.attach(Content::text("d"));
                Ok(json!({"n": 1}))
            }),
    );
    let p = pipeline(vec![tool]);
    let r = p.call(CallRequest::new("pictures", json!({}))).await;
    assert_eq!(r.data(), Some(&json!({"n": 1})));
    assert!(r.truncated, "{r:?}");
    // The first two fit (1000 bytes); the audio block would pass the limit, so it and every
    // later block are left out, and a note says so.
    assert_eq!(r.content.len(), 3, "{:?}", r.content);
    assert_eq!(r.content[0], Content::text("a".repeat(500)));
    assert_eq!(r.content[1], Content::image("b".repeat(500), "image/png"));
    assert_eq!(
        r.content[2],
        Content::text(
            "[toolgate: 2 content block(s) of 101 bytes left out: the result is over the tool's max_output_bytes]"
        )
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["truncated"], json!(true));

    // Within the limit nothing changes.
    let small = Arc::new(
        builder("small_pictures")
            .constraints(constraints(|c| c.max_output_bytes = Some(1024)))
            .handler(|_, ctx| async move {
                ctx.attach(Content::image("b".repeat(1000), "image/png"));
                Ok(json!("1234567"))
            }),
    );
    let p = pipeline(vec![small]);
    let r = p.call(CallRequest::new("small_pictures", json!({}))).await;
    assert!(!r.truncated, "{r:?}");
    assert_eq!(
        r.content,
        vec![Content::image("b".repeat(1000), "image/png")]
    );
}

#[tokio::test]
async fn large_structured_output_becomes_truncated_json_text() {
    let cap = constraints(|c| c.max_output_bytes = Some(1024));
    let value =
        json!({"rows": (0..200).map(|i| json!({"id": i, "name": "ñame"})).collect::<Vec<_>>()});
    let p = pipeline(vec![returning("rows", value.clone(), cap)]);
    let r = p.call(CallRequest::new("rows", json!({}))).await;
    assert!(r.truncated);
    let cut = r.data().unwrap().as_str().unwrap();
    assert!(cut.len() <= 1024);
    assert!(value.to_string().starts_with(cut));
}

#[tokio::test]
async fn output_schema_is_enforced_before_truncation() {
    let tool = |value: Value, cap: u64| {
        Arc::new(
            builder("typed_out")
                .output_schema(json!({
                    "type": "object",
                    "properties": {"temperature": {"type": "number"}, "note": {"type": "string"}},
                    "required": ["temperature"]
                }))
                .constraints(constraints(|c| c.max_output_bytes = Some(cap)))
                .handler(move |_, _| {
                    let value = value.clone();
                    async move { Ok(value) }
                }),
        ) as Arc<dyn Tool>
    };
    let p = pipeline(vec![tool(json!({"temperature": "warm"}), 4096)]);
    let r = p.call(CallRequest::new("typed_out", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::OutputInvalid));
    let msg = r.error().unwrap();
    assert!(msg.contains("/temperature"), "{msg}");
    assert!(msg.contains("output schema"), "{msg}");
    // Output invalid is not retried.
    assert_eq!(r.attempts, 1);

    let p = pipeline(vec![tool(json!({"note": "n"}), 4096)]);
    let r = p.call(CallRequest::new("typed_out", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::OutputInvalid));

    let p = pipeline(vec![tool(json!({"temperature": 3.5}), 4096)]);
    let r = p.call(CallRequest::new("typed_out", json!({}))).await;
    assert_eq!(r.data(), Some(&json!({"temperature": 3.5})));

    // Valid but too big: checked whole, then cut.
    let big = json!({"temperature": 1, "note": "n".repeat(3000)});
    let p = pipeline(vec![tool(big, 1024)]);
    let r = p.call(CallRequest::new("typed_out", json!({}))).await;
    assert!(r.is_ok() && r.truncated, "{:?}", r.error());
}

// ---- failures that are not the caller's -----------------------------------------------------

#[tokio::test]
async fn panicking_handlers_become_execution_errors() {
    let inside = builder("panics_inside").handler(|_, _| async {
        if true {
            panic!("boom inside");
        }
        Ok(json!(1))
    });
    let early = builder("panics_early").handler(|args: Value, _| {
        if args.is_object() {
            panic!("boom before the future");
        }
        async { Ok(json!(1)) }
    });
    let odd = builder("panics_oddly").handler(|_, _| async {
        if true {
            std::panic::panic_any(42_u8);
        }
        Ok(json!(1))
    });
    let p = pipeline(vec![Arc::new(inside), Arc::new(early), Arc::new(odd)]);
    for (name, detail) in [
        ("panics_inside", "boom inside"),
        ("panics_early", "boom before the future"),
        ("panics_oddly", "unknown panic"),
    ] {
        let r = p.call(CallRequest::new(name, json!({}))).await;
        assert_eq!(kind(&r), Some(ErrorKind::Execution), "{name}");
        let msg = r.error().unwrap();
        assert!(
            msg.contains(name) && msg.contains("panicked") && msg.contains(detail),
            "{msg}"
        );
        // Not retried, even though the tool is idempotent.
        assert_eq!(r.attempts, 1, "{name}");
    }
    // The pipeline keeps working after a panic.
    let r = p.call(CallRequest::new("panics_inside", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Execution));
}

struct PanicsInCall;

impl Tool for PanicsInCall {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("raw_panic", DESCRIPTION)
    }

    fn call(&self, _args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        panic!("raw tool panicked while building its future")
    }
}

#[tokio::test]
async fn a_tool_trait_impl_panicking_in_call_is_contained() {
    let p = pipeline(vec![Arc::new(PanicsInCall)]);
    let r = p.call(CallRequest::new("raw_panic", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Execution));
    assert!(r.error().unwrap().contains("while building its future"));
}

#[tokio::test]
async fn handler_errors_keep_their_kind_and_message() {
    for error_kind in ErrorKind::ALL {
        let tool = builder("fails").handler(move |_, _| async move {
            Err(ToolError::new(error_kind, format!("failed as {error_kind}")).permanent())
        });
        let p = pipeline(vec![Arc::new(tool)]);
        let r = p.call(CallRequest::new("fails", json!({}))).await;
        assert_eq!(kind(&r), Some(error_kind));
        assert_eq!(r.error(), Some(format!("failed as {error_kind}").as_str()));
        assert_eq!(r.attempts, 1);
        assert!(r.data().is_none());
    }
}

#[tokio::test]
async fn a_definition_without_implementation_is_unavailable() {
    let reg = Arc::new(Registry::new());
    reg.register_definition(ToolDefinition::new("declared_only", DESCRIPTION))
        .unwrap();
    let mut http = ToolDefinition::new("http_tool", DESCRIPTION);
    http.run = Some(RunSpec {
        kind: "http".into(),
        settings: Map::new(),
    });
    reg.register_definition(http).unwrap();
    let p = Pipeline::new(reg);
    let r = p.call(CallRequest::new("declared_only", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Unavailable));
    let msg = r.error().unwrap();
    assert!(
        msg.contains("declared_only") && msg.contains("no implementation"),
        "{msg}"
    );
    assert_eq!(r.attempts, 1, "a missing implementation is not retried");
    let r = p.call(CallRequest::new("http_tool", json!({}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Unavailable));
    assert!(r.error().unwrap().contains("\"http\""), "{:?}", r.error());
}

#[tokio::test]
async fn isolation_the_in_process_executor_cannot_give_is_refused() {
    let calls = Arc::new(AtomicU32::new(0));
    let make = |name: &str, c: Option<Constraints>, run: Option<&str>| {
        let calls = calls.clone();
        let mut def = ToolDefinition::new(name, DESCRIPTION);
        def.constraints = c;
        def.run = run.map(|k| RunSpec {
            kind: k.into(),
            settings: Map::new(),
        });
        Arc::new(ToolBuilder::from_definition(def).handler(move |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!("ran")) }
        })) as Arc<dyn Tool>
    };
    let iso = |level| Some(constraints(|c| c.isolation = Some(level)));
    let p = pipeline(vec![
        make("strict_tool", iso(Isolation::Strict), None),
        make("standard_tool", iso(Isolation::Standard), None),
        make("restricted_tool", iso(Isolation::Restricted), None),
        make("command_tool", None, Some("command")),
        make("trusted_command", iso(Isolation::None), Some("command")),
        make("plain_tool", None, None),
    ]);
    for (name, level) in [
        ("strict_tool", "strict"),
        ("standard_tool", "standard"),
        ("restricted_tool", "restricted"),
        ("command_tool", "standard"),
    ] {
        let r = p.call(CallRequest::new(name, json!({}))).await;
        assert_eq!(kind(&r), Some(ErrorKind::Unavailable), "{name}");
        let msg = r.error().unwrap();
        assert!(
            msg.contains(&format!("requires {level} isolation")),
            "{msg}"
        );
        assert_eq!(r.attempts, 1);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    for name in ["trusted_command", "plain_tool"] {
        let r = p.call(CallRequest::new(name, json!({}))).await;
        assert_eq!(r.data(), Some(&json!("ran")), "{name}");
    }
}

// ---- extra stages, observers ----------------------------------------------------------------

#[tokio::test]
async fn rate_limit_stage() {
    let calls = Arc::new(AtomicU32::new(0));
    let tool = |name: &str| {
        let calls = calls.clone();
        Arc::new(builder(name).handler(move |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!("ok")) }
        })) as Arc<dyn Tool>
    };
    // Nonsense limits are refused when made, so the stage can never panic on them.
    assert!(RateLimit::new(0, 1.0).is_err());
    assert!(RateLimit::new(1, 0.0).is_err());
    assert!(RateLimit::new(1, f64::NAN).is_err());
    assert!(RateLimit::new(1, f64::INFINITY).is_err());
    let stage = RateLimitStage::new(RateLimit::new(2, 1e-30).unwrap())
        .tool("slow_refill", RateLimit::new(1, 0.001).unwrap());
    let p = PipelineBuilder::new(registry(vec![tool("limited"), tool("slow_refill")]))
        .stage(Arc::new(stage))
        .build();
    assert_eq!(
        p.stage_names(),
        [
            "resolve",
            "authorize",
            "validate_input",
            "approval",
            "rate_limit",
            "output_checks",
            "retry"
        ]
    );
    let ann = || principal("ann");
    let mut kinds = Vec::new();
    for _ in 0..3 {
        let r = p
            .call(CallRequest::new("limited", json!({})).principal(ann()))
            .await;
        kinds.push(kind(&r));
    }
    assert_eq!(kinds, [None, None, Some(ErrorKind::RateLimited)]);
    let r = p
        .call(CallRequest::new("limited", json!({})).principal(ann()))
        .await;
    // A refill so slow that the wait overflows a Duration still answers, without panicking.
    assert!(
        r.error()
            .unwrap()
            .contains("Rate limit exceeded for tool limited; retry in"),
        "{:?}",
        r.error()
    );
    assert_eq!(r.attempts, 0, "a refused call never reaches the executor");
    // Buckets are per principal and per tool.
    let r = p
        .call(CallRequest::new("limited", json!({})).principal(principal("bob")))
        .await;
    assert!(r.is_ok());
    let r = p
        .call(CallRequest::new("slow_refill", json!({})).principal(ann()))
        .await;
    assert!(r.is_ok());
    let r = p
        .call(CallRequest::new("slow_refill", json!({})).principal(ann()))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::RateLimited));
    let msg = r.error().unwrap();
    assert!(
        msg.contains("slow_refill") && msg.contains("retry in"),
        "{msg}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn observers_see_every_call_once() {
    let first = Arc::new(Recorder::default());
    let second = Arc::new(Recorder::default());
    let (slow, _, _, _) = hanging("slow_tool", constraints(|c| c.timeout_ms = Some(1000)));
    let p = PipelineBuilder::new(registry(vec![
        echo("echo_tool"),
        Arc::new(weather().handler(|_, _| async { Ok(json!(1)) })),
        Arc::new(builder("panics").handler(|_, _| async {
            if true {
                panic!("observed panic");
            }
            Ok(json!(1))
        })),
        slow,
    ]))
    .observer(first.clone())
    .observer(second.clone())
    .build();
    let requests = vec![
        CallRequest::new("echo_tool", json!({"x": 1})).principal(principal("ann")),
        CallRequest::new("missing", json!({})),
        CallRequest::new("get_weather", json!({})),
        CallRequest::new("panics", json!({})),
    ];
    let mut results = Vec::new();
    for request in requests {
        results.push(p.call(request).await);
    }
    results.push(bounded(p.call(CallRequest::new("slow_tool", json!({})))).await);

    for recorder in [&first, &second] {
        let seen = recorder.0.lock().unwrap();
        assert_eq!(seen.len(), results.len());
        for ((observed, spec, who), result) in seen.iter().zip(&results) {
            assert_eq!(observed, result);
            let want_spec = (result.tool != "missing").then(|| result.tool.clone());
            assert_eq!(spec, &want_spec);
            let want_who = if result.tool == "echo_tool" {
                "ann"
            } else {
                "local"
            };
            assert_eq!(who, want_who);
        }
    }
    let kinds: Vec<Option<ErrorKind>> = results.iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            None,
            Some(ErrorKind::NotFound),
            Some(ErrorKind::Validation),
            Some(ErrorKind::Execution),
            Some(ErrorKind::Timeout)
        ]
    );
}

#[tokio::test]
async fn sensitive_parameters_are_redacted_in_the_envelope() {
    let seen = Arc::new(Mutex::new(Value::Null));
    let tool = {
        let seen = seen.clone();
        builder("call_api")
            .param(
                Parameter::new("endpoint", ParamType::String)
                    .description("Endpoint")
                    .required(),
            )
            .param(
                Parameter::new("api_key", ParamType::String)
                    .description("Key")
                    .sensitive(),
            )
            .handler(move |args, _| {
                *seen.lock().unwrap() = args.clone();
                async { Ok(json!("done")) }
            })
    };
    let recorder = Arc::new(Recorder::default());
    let p = PipelineBuilder::new(registry(vec![Arc::new(tool)]))
        .observer(recorder.clone())
        .build();
    let r = p
        .call(CallRequest::new(
            "call_api",
            json!({"endpoint": "/v1", "api_key": "s3cret"}),
        ))
        .await;
    assert!(r.is_ok(), "{:?}", r.error());
    // The handler gets the real value; the envelope and observers do not.
    assert_eq!(seen.lock().unwrap()["api_key"], "s3cret");
    assert_eq!(r.input, json!({"endpoint": "/v1", "api_key": "[REDACTED]"}));
    assert!(!serde_json::to_string(&r).unwrap().contains("s3cret"));
    // Also when the call fails.
    let r = p
        .call(CallRequest::new(
            "call_api",
            json!({"endpoint": 5, "api_key": "s3cret"}),
        ))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::Validation));
    assert!(!serde_json::to_string(&r).unwrap().contains("s3cret"));
    // Even when the sensitive value itself is what is invalid: messages do not quote values.
    let r = p
        .call(CallRequest::new(
            "call_api",
            json!({"endpoint": "/v1", "api_key": ["s3cret"]}),
        ))
        .await;
    assert_eq!(kind(&r), Some(ErrorKind::Validation));
    assert!(r.error().unwrap().contains("/api_key"), "{:?}", r.error());
    assert!(!serde_json::to_string(&r).unwrap().contains("s3cret"));
    for (observed, _, _) in recorder.0.lock().unwrap().iter() {
        assert!(!serde_json::to_string(observed).unwrap().contains("s3cret"));
    }
}

// ---- tool authoring -------------------------------------------------------------------------

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AddInput {
    /// First addend.
    a: i64,
    /// Second addend.
    b: i64,
    /// Optional scale, 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    scale: Option<u8>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
struct AddOutput {
    sum: i64,
}

#[tokio::test]
async fn typed_tools_validate_and_deserialize() {
    let tool = builder("add_numbers").typed(|input: AddInput, _ctx| async move {
        Ok(AddOutput {
            sum: (input.a + input.b) * i64::from(input.scale.unwrap_or(1)),
        })
    });
    let def = tool.definition();
    assert_eq!(
        def.input_schema,
        Some(toolgate_core::schema_of::<AddInput>())
    );
    assert!(def.parameters.is_empty());
    assert_eq!(def.output_schema.as_ref().unwrap()["type"], "object");
    let schema = def.input_schema.clone().unwrap();
    assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
    assert_eq!(schema["required"], json!(["a", "b"]));

    let p = pipeline(vec![Arc::new(tool)]);
    let cases: Vec<(Value, Result<Value, ErrorKind>)> = vec![
        (json!({"a": 1, "b": 2}), Ok(json!({"sum": 3}))),
        (json!({"a": -4, "b": 2, "scale": 3}), Ok(json!({"sum": -6}))),
        (json!({"a": 1}), Err(ErrorKind::Validation)),
        (json!({"a": "1", "b": 2}), Err(ErrorKind::Validation)),
        (json!({"a": 1.5, "b": 2}), Err(ErrorKind::Validation)),
        (
            json!({"a": 1, "b": 2, "scale": 11}),
            Err(ErrorKind::Validation),
        ),
        (
            json!({"a": 1, "b": 2, "scale": 0}),
            Err(ErrorKind::Validation),
        ),
    ];
    for (args, want) in cases {
        let r = p.call(CallRequest::new("add_numbers", args.clone())).await;
        match want {
            Ok(data) => assert_eq!(r.data(), Some(&data), "{args}: {:?}", r.error()),
            Err(k) => assert_eq!(kind(&r), Some(k), "{args}"),
        }
    }
}

#[tokio::test]
async fn typed_handler_errors_and_plain_output_types() {
    let tool = builder("greet").typed(|name: String, _ctx| async move {
        if name.is_empty() {
            return Err(ToolError::validation("name must not be empty"));
        }
        Ok(format!("Hello, {name}!"))
    });
    let def = tool.definition();
    assert_eq!(def.output_schema, Some(json!({"type": "string"})));
    // A raw input schema must be an object schema: a `String` input is refused at registration.
    let err = Registry::new().register(Arc::new(tool)).unwrap_err();
    assert_eq!(
        err.report().unwrap().errors[0].code,
        "input_schema.not_object"
    );

    #[derive(Deserialize, schemars::JsonSchema)]
    struct Named {
        name: String,
    }
    let tool = builder("greet").typed(|input: Named, _ctx| async move {
        if input.name.is_empty() {
            return Err(ToolError::validation("name must not be empty"));
        }
        Ok(format!("Hello, {}!", input.name))
    });
    let p = pipeline(vec![Arc::new(tool)]);
    let r = p
        .call(CallRequest::new("greet", json!({"name": "Ada"})))
        .await;
    assert_eq!(r.data(), Some(&json!("Hello, Ada!")));
    let r = p.call(CallRequest::new("greet", json!({"name": ""}))).await;
    assert_eq!(kind(&r), Some(ErrorKind::Validation));
    assert_eq!(r.error(), Some("name must not be empty"));
}

/// The factory pattern: a tool built by a function, closing over context it was given.
fn read_sources_tool(name: &str, product_id: String, sources: Arc<Vec<String>>) -> Arc<dyn Tool> {
    Arc::new(
        builder(name)
            .param(
                Parameter::new("limit", ParamType::Integer)
                    .description("Max")
                    .default_value(json!(10)),
            )
            .handler(move |args, _| {
                let product_id = product_id.clone();
                let sources = Arc::clone(&sources);
                async move {
                    let limit = usize::try_from(args["limit"].as_u64().unwrap_or(0)).unwrap_or(0);
                    Ok(json!({
                        "productId": product_id,
                        "sources": sources.iter().take(limit).collect::<Vec<_>>(),
                    }))
                }
            }),
    )
}

#[tokio::test]
async fn factory_closures_capture_their_context() {
    let shared = Arc::new(vec![
        "a.md".to_owned(),
        "b.md".to_owned(),
        "c.md".to_owned(),
    ]);
    let p = pipeline(vec![
        read_sources_tool("read_sources_alpha", "alpha".into(), Arc::clone(&shared)),
        read_sources_tool("read_sources_beta", "beta".into(), Arc::clone(&shared)),
    ]);
    let r = p
        .call(CallRequest::new("read_sources_alpha", json!({"limit": 2})))
        .await;
    assert_eq!(
        r.data(),
        Some(&json!({"productId": "alpha", "sources": ["a.md", "b.md"]}))
    );
    let r = p
        .call(CallRequest::new("read_sources_beta", json!({})))
        .await;
    assert_eq!(
        r.data(),
        Some(&json!({"productId": "beta", "sources": ["a.md", "b.md", "c.md"]}))
    );
}

struct Database {
    name: &'static str,
}

type ProgressReport = (f64, Option<f64>, Option<String>);

#[derive(Default)]
struct Progress(Mutex<Vec<ProgressReport>>);

impl ProgressSink for Progress {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        self.0
            .lock()
            .unwrap()
            .push((progress, total, message.map(str::to_owned)));
    }
}

#[tokio::test]
async fn the_context_carries_user_auth_extensions_and_progress() {
    let tool = builder("whoami").handler(|_, ctx| async move {
        ctx.report_progress(1.0, Some(2.0), Some("halfway"));
        let db = ctx.extension::<Database>().map(|d| d.name);
        let missing = ctx.extension::<String>().is_some();
        let http = ctx.http().err().map(|e| (e.kind(), e.is_retryable()));
        Ok(json!({
            "user": ctx.user_id().as_str(),
            "grants": ctx.principal().grants.len(),
            "sub": ctx.auth().get("sub"),
            "db": db,
            "missingExtension": missing,
            "tool": ctx.tool().as_str(),
            "callId": ctx.call_id().to_string(),
            "attempt": ctx.attempt(),
            "http": http.map(|(k, r)| format!("{k}/{r}")),
        }))
    });
    let p = pipeline(vec![Arc::new(tool)]);
    let mut extensions = Extensions::new();
    extensions.insert(Database { name: "main" });
    let mut claims = Map::new();
    claims.insert("sub".into(), json!("user-42"));
    let progress = Arc::new(Progress::default());
    let request = CallRequest::new("whoami", json!({}))
        .principal(principal("user-42").grant(Permission::parse("tool.x").unwrap()))
        .auth(claims)
        .extensions(extensions)
        .progress(progress.clone());
    let call_id = request.call_id;
    let r = p.call(request).await;
    assert_eq!(r.call_id, call_id);
    assert_eq!(
        r.data(),
        Some(&json!({
            "user": "user-42",
            "grants": 1,
            "sub": "user-42",
            "db": "main",
            "missingExtension": false,
            "tool": "whoami",
            "callId": call_id.to_string(),
            "attempt": 1,
            "http": "unavailable/false",
        }))
    );
    assert_eq!(
        *progress.0.lock().unwrap(),
        [(1.0, Some(2.0), Some("halfway".to_owned()))]
    );
}

struct FakeHttp;

impl HttpClient for FakeHttp {
    fn send<'a>(
        &'a self,
        request: HttpRequest,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<HttpResponse, ToolError>> {
        Box::pin(async move {
            Ok(HttpResponse {
                status: 200,
                headers: Vec::new(),
                body: format!("{} {}", request.method, request.url).into_bytes(),
            })
        })
    }
}

#[tokio::test]
async fn the_pipeline_hands_its_http_client_to_tools() {
    let tool = builder("fetch_page").handler(|_, ctx| async move {
        let response = ctx
            .http()?
            .send(
                HttpRequest {
                    method: "GET".into(),
                    url: "https://example.com/".into(),
                    ..HttpRequest::default()
                },
                ctx.cancellation(),
            )
            .await?;
        Ok(json!({
            "status": response.status,
            "body": String::from_utf8_lossy(&response.body),
        }))
    });
    let p = PipelineBuilder::new(registry(vec![Arc::new(tool)]))
        .http_client(Arc::new(FakeHttp))
        .build();
    let r = p.call(CallRequest::new("fetch_page", json!({}))).await;
    assert_eq!(
        r.data(),
        Some(&json!({"status": 200, "body": "GET https://example.com/"}))
    );
}

#[tokio::test]
async fn envelope_basics_from_a_real_call() {
    let p = pipeline(vec![echo("echo_tool")]);
    let before = chrono::Utc::now();
    let r = p
        .call(CallRequest::new("echo_tool", json!({"x": [1, 2]})))
        .await;
    let after = chrono::Utc::now();
    assert!(r.fetched_at >= before && r.fetched_at <= after);
    assert!(r.duration_ms >= 0.0);
    assert_eq!(r.tool, "echo_tool");
    assert_eq!(r.data(), Some(&json!({"x": [1, 2]})));
    assert!(!r.truncated && r.output_ref.is_none());
    // Every call gets its own id.
    let r2 = p.call(CallRequest::new("echo_tool", json!({}))).await;
    assert_ne!(r.call_id, r2.call_id);
}

#[tokio::test]
async fn tools_are_shared_across_concurrent_calls() {
    let counter = Arc::new(AtomicU32::new(0));
    let tool = {
        let counter = counter.clone();
        builder("count_up").handler(move |_, _| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::task::yield_now().await;
                Ok(json!(n))
            }
        })
    };
    let p = pipeline(vec![Arc::new(tool)]);
    let calls = (0..50).map(|_| {
        let p = p.clone();
        tokio::spawn(async move { p.call(CallRequest::new("count_up", json!({}))).await })
    });
    let mut seen = Vec::new();
    for c in calls {
        seen.push(c.await.unwrap().data().unwrap().as_u64().unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..50).collect::<Vec<u64>>());
}

// ---- containment of panics outside handlers --------------------------------------------------

struct PanickingStage;

impl toolgate_core::Stage for PanickingStage {
    fn name(&self) -> &'static str {
        "panicking"
    }

    fn run<'a>(
        &'a self,
        _call: &'a mut toolgate_core::Call,
        _next: toolgate_core::Next<'a>,
    ) -> toolgate_core::BoxFuture<'a, toolgate_core::ToolOutput> {
        panic!("stage bug")
    }
}

struct PanickingObserver(Arc<AtomicU32>);

/// Panics before it even returns a future.
struct EagerlyPanickingObserver;

impl toolgate_core::CallObserver for EagerlyPanickingObserver {
    fn on_call<'a>(
        &'a self,
        _record: &'a toolgate_core::CallRecord<'a>,
    ) -> toolgate_core::BoxFuture<'a, ()> {
        panic!("eager observer bug")
    }
}

impl toolgate_core::CallObserver for PanickingObserver {
    fn on_call<'a>(
        &'a self,
        _record: &'a toolgate_core::CallRecord<'a>,
    ) -> toolgate_core::BoxFuture<'a, ()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { panic!("observer bug") })
    }
}

#[tokio::test]
async fn a_panicking_stage_or_observer_still_yields_one_result() {
    let ok =
        || Arc::new(builder("fine").handler(|_, _| async { Ok(json!("ok")) })) as Arc<dyn Tool>;
    let p = PipelineBuilder::new(registry(vec![ok()]))
        .stage(Arc::new(PanickingStage))
        .build();
    let r = p.call(CallRequest::new("fine", json!({}))).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution));
    assert!(r.error().unwrap().contains("stage bug"), "{:?}", r.error());

    let seen = Arc::new(AtomicU32::new(0));
    let p = PipelineBuilder::new(registry(vec![ok()]))
        .observer(Arc::new(EagerlyPanickingObserver))
        .observer(Arc::new(PanickingObserver(seen.clone())))
        .build();
    let r = p.call(CallRequest::new("fine", json!({}))).await;
    assert_eq!(r.data(), Some(&json!("ok")));
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tools_outside_the_allowed_list_look_exactly_like_missing_ones() {
    let p = pipeline(vec![Arc::new(
        weather().handler(|_, _| async { Ok(json!({})) }),
    )]);
    let hidden = Principal::local().only_tools(["other_tool"]);
    let seen = p
        .call(CallRequest::new("get_weather", json!({})).principal(hidden.clone()))
        .await;
    let missing = p
        .call(CallRequest::new("get_weathr", json!({})).principal(hidden.clone()))
        .await;
    assert_eq!(seen.error_kind(), Some(ErrorKind::NotFound));
    assert_eq!(
        seen.error().unwrap().replace("get_weather", "X"),
        "Tool not found: X. List the available tools to find the right name."
    );
    // The typo gets no "did you mean get_weather?" either.
    assert_eq!(
        missing.error().unwrap(),
        "Tool not found: get_weathr. List the available tools to find the right name."
    );
    // With the tool allowed, the same typo gets the suggestion.
    let r = p
        .call(CallRequest::new("get_weathr", json!({})).principal(Principal::local()))
        .await;
    assert!(r.error().unwrap().contains("Did you mean get_weather?"));
}

/// A plan's hidden built-ins (`Principal::hide_tools`) are as absent as tools outside the
/// allowed list: not found word for word, never suggested, whatever `allowed_tools` says.
#[tokio::test]
async fn hidden_tools_look_exactly_like_missing_ones() {
    let p = pipeline(vec![Arc::new(
        weather().handler(|_, _| async { Ok(json!({})) }),
    )]);
    let hidden = Principal::local().hide_tools(["get_weather"]);
    assert!(!hidden.may_call("get_weather") && hidden.may_call("other_tool"));
    let seen = p
        .call(CallRequest::new("get_weather", json!({})).principal(hidden.clone()))
        .await;
    assert_eq!(seen.error_kind(), Some(ErrorKind::NotFound));
    assert_eq!(seen.attempts, 0);
    assert_eq!(
        seen.error().unwrap(),
        "Tool not found: get_weather. List the available tools to find the right name."
    );
    let typo = p
        .call(CallRequest::new("get_weathr", json!({})).principal(hidden.clone()))
        .await;
    assert!(!typo.error().unwrap().contains("Did you mean"));
    // Hiding wins over an allowed list naming the tool; hiding more keeps what was hidden.
    let both = Principal::local()
        .only_tools(["get_weather"])
        .hide_tools(["get_weather"])
        .hide_tools(["x"]);
    assert!(!both.may_call("get_weather"));
    let r = p
        .call(CallRequest::new("get_weather", json!({})).principal(both))
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::NotFound));
}
