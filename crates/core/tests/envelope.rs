//! The result envelope: its wire form (camelCase, `fetchedAt` in ISO 8601 UTC with milliseconds,
//! `data` xor `error`), strict deserialization, and a property test that runs random tool
//! outcomes through the real pipeline and checks the envelope invariants every time.
#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};
use toolgate_core::{
    AutoDeny, CallId, CallRequest, CancellationToken, Constraints, Effect, ErrorKind, Outcome,
    ParamType, Parameter, Permission, PipelineBuilder, PreApproved, Principal, PrincipalId,
    Registry, ToolBuilder, ToolError, ToolResult,
};

fn at(ms: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 15, 10, 30, 0).unwrap()
        + chrono::Duration::milliseconds(i64::from(ms))
}

fn result(outcome: Outcome) -> ToolResult {
    ToolResult {
        tool: "get_weather".into(),
        call_id: CallId::parse("01890a5d-ac96-774b-bcce-b302099a8057").unwrap(),
        fetched_at: at(0),
        input: json!({"city": "Oslo", "units": "metric"}),
        outcome,
        attempts: 1,
        duration_ms: 41.7,
        truncated: false,
        output_ref: None,
        content: Vec::new(),
        approval_id: None,
    }
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn success_serializes_as_designed() {
    let r = result(Outcome::Data(json!({"temperature": 3.5})));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v,
        json!({
            "tool": "get_weather",
            "callId": "01890a5d-ac96-774b-bcce-b302099a8057",
            "fetchedAt": "2026-01-15T10:30:00.000Z",
            "input": {"city": "Oslo", "units": "metric"},
            "data": {"temperature": 3.5},
            "attempts": 1,
            "durationMs": 41.7
        })
    );
    assert_eq!(
        keys(&v),
        [
            "tool",
            "callId",
            "fetchedAt",
            "input",
            "data",
            "attempts",
            "durationMs"
        ]
    );
    assert!(r.is_ok());
    assert_eq!(r.data(), Some(&json!({"temperature": 3.5})));
    assert_eq!(r.error(), None);
    assert_eq!(r.error_kind(), None);
}

#[test]
fn failure_serializes_error_and_error_kind_without_data() {
    let r = result(Outcome::Error {
        kind: ErrorKind::Timeout,
        message: "Tool get_weather timed out after 5000 ms; the call was stopped".into(),
    });
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        keys(&v),
        [
            "tool",
            "callId",
            "fetchedAt",
            "input",
            "error",
            "errorKind",
            "attempts",
            "durationMs"
        ]
    );
    assert_eq!(v["errorKind"], "timeout");
    assert!(v.get("data").is_none());
    assert!(!r.is_ok());
    assert_eq!(r.error_kind(), Some(ErrorKind::Timeout));
    assert!(r.data().is_none());
}

#[test]
fn error_kinds_are_snake_case() {
    let names = [
        "not_found",
        "validation",
        "authorization",
        "confirmation_required",
        "rejected",
        "timeout",
        "cancelled",
        "execution",
        "output_invalid",
        "rate_limited",
        "unavailable",
        "budget_exhausted",
    ];
    assert_eq!(ErrorKind::ALL.len(), names.len());
    for (kind, name) in ErrorKind::ALL.iter().zip(names) {
        assert_eq!(kind.as_str(), name);
        assert_eq!(kind.to_string(), name);
        assert_eq!(serde_json::to_value(kind).unwrap(), json!(name));
        assert_eq!(
            serde_json::from_value::<ErrorKind>(json!(name)).unwrap(),
            *kind
        );
        let r = result(Outcome::Error {
            kind: *kind,
            message: "m".into(),
        });
        assert_eq!(serde_json::to_value(&r).unwrap()["errorKind"], json!(name));
    }
}

#[test]
fn fetched_at_is_utc_with_exactly_three_fractional_digits() {
    let cases: &[(DateTime<Utc>, &str)] = &[
        (at(0), "2026-01-15T10:30:00.000Z"),
        (at(7), "2026-01-15T10:30:00.007Z"),
        (at(123), "2026-01-15T10:30:00.123Z"),
        (
            at(999) + chrono::Duration::nanoseconds(999_999),
            "2026-01-15T10:30:00.999Z",
        ),
        (
            Utc.with_ymd_and_hms(1999, 12, 31, 23, 59, 59).unwrap()
                + chrono::Duration::nanoseconds(456_789_123),
            "1999-12-31T23:59:59.456Z",
        ),
    ];
    for (time, want) in cases {
        let mut r = result(Outcome::Data(json!(null)));
        r.fetched_at = *time;
        assert_eq!(r.fetched_at_string(), *want);
        assert_eq!(serde_json::to_value(&r).unwrap()["fetchedAt"], json!(want));
    }
}

#[test]
fn truncated_and_output_ref_appear_only_when_set() {
    let mut r = result(Outcome::Data(json!("cut")));
    let v = serde_json::to_value(&r).unwrap();
    assert!(v.get("truncated").is_none() && v.get("outputRef").is_none());
    r.truncated = true;
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["truncated"], json!(true));
    assert!(v.get("outputRef").is_none());
    r.output_ref = Some("calls/0189/output".into());
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["outputRef"], json!("calls/0189/output"));
    assert_eq!(keys(&v)[keys(&v).len() - 2..], ["truncated", "outputRef"]);
}

#[test]
fn there_is_never_a_success_key() {
    for outcome in [
        Outcome::Data(json!(true)),
        Outcome::Data(json!({"success": true})),
        Outcome::Error {
            kind: ErrorKind::Execution,
            message: "x".into(),
        },
    ] {
        let v = serde_json::to_value(result(outcome)).unwrap();
        assert!(v.get("success").is_none());
        assert!(v.get("timestamp").is_none());
    }
}

#[test]
fn deserialization_round_trips() {
    let mut cases = vec![
        result(Outcome::Data(json!({"temperature": 3.5}))),
        result(Outcome::Data(Value::Null)),
        result(Outcome::Data(json!([]))),
    ];
    for kind in ErrorKind::ALL {
        cases.push(result(Outcome::Error {
            kind,
            message: format!("failed: {kind}"),
        }));
    }
    let mut cut = result(Outcome::Data(json!("abc")));
    cut.truncated = true;
    cut.output_ref = Some("ref-1".into());
    cut.attempts = 3;
    cut.duration_ms = 0.123_456_789;
    cut.fetched_at = at(999);
    cases.push(cut);
    for r in cases {
        let text = serde_json::to_string(&r).unwrap();
        let back: ToolResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r, "{text}");
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }
}

#[test]
fn present_null_data_is_data() {
    let r: ToolResult = serde_json::from_value(json!({
        "tool": "t", "callId": "01890a5d-ac96-774b-bcce-b302099a8057",
        "fetchedAt": "2026-01-15T10:30:00.000Z", "data": null
    }))
    .unwrap();
    assert_eq!(r.outcome, Outcome::Data(Value::Null));
    assert_eq!(r.attempts, 0);
    assert_eq!(r.input, Value::Null);
    let v = serde_json::to_value(&r).unwrap();
    assert!(v.as_object().unwrap().contains_key("data"));
}

#[test]
fn an_error_without_kind_reads_as_execution() {
    let r: ToolResult = serde_json::from_value(json!({
        "tool": "t", "callId": "01890a5d-ac96-774b-bcce-b302099a8057",
        "fetchedAt": "2026-01-15T10:30:00.000Z", "error": "it broke"
    }))
    .unwrap();
    assert_eq!(
        r.outcome,
        Outcome::Error {
            kind: ErrorKind::Execution,
            message: "it broke".into()
        }
    );
}

#[test]
fn invalid_envelopes_are_rejected() {
    let base = || {
        json!({
            "tool": "t",
            "callId": "01890a5d-ac96-774b-bcce-b302099a8057",
            "fetchedAt": "2026-01-15T10:30:00.000Z",
        })
    };
    let with = |extra: Value| {
        let mut v = base();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "data and error",
            with(json!({"data": 1, "error": "x"})),
            "never both",
        ),
        (
            "data, error and kind",
            with(json!({"data": 1, "error": "x", "errorKind": "execution"})),
            "never both",
        ),
        ("neither", base(), "either data or error"),
        (
            "kind without error",
            with(json!({"errorKind": "timeout"})),
            "either data or error",
        ),
        (
            "data with a kind",
            with(json!({"data": 1, "errorKind": "timeout"})),
            "a result with data has no errorKind",
        ),
        (
            "success key",
            with(json!({"data": 1, "success": true})),
            "success",
        ),
        (
            "unknown kind",
            with(json!({"error": "x", "errorKind": "oops"})),
            "oops",
        ),
        (
            "bad call id",
            {
                let mut v = with(json!({"data": 1}));
                v["callId"] = json!("not-a-uuid");
                v
            },
            "",
        ),
        (
            "bad time",
            {
                let mut v = with(json!({"data": 1}));
                v["fetchedAt"] = json!("yesterday");
                v
            },
            "",
        ),
        (
            "no time",
            {
                let mut v = with(json!({"data": 1}));
                v.as_object_mut().unwrap().remove("fetchedAt");
                v
            },
            "fetchedAt",
        ),
        (
            "no tool",
            {
                let mut v = with(json!({"data": 1}));
                v.as_object_mut().unwrap().remove("tool");
                v
            },
            "tool",
        ),
        (
            "negative attempts",
            with(json!({"data": 1, "attempts": -1})),
            "",
        ),
    ];
    for (label, value, needle) in cases {
        let err = serde_json::from_value::<ToolResult>(value).unwrap_err();
        assert!(err.to_string().contains(needle), "{label}: {err}");
    }
}

#[test]
fn call_ids_parse_and_print() {
    let id = CallId::new();
    assert_eq!(CallId::parse(&id.to_string()).unwrap(), id);
    assert_eq!(format!("{id:?}"), id.to_string());
    assert_ne!(CallId::new(), CallId::new());
    let err = CallId::parse("nope").unwrap_err();
    assert!(err.contains("nope"), "{err}");
}

// ---- property test through the real pipeline ------------------------------------------------

#[derive(Clone, Debug)]
enum Behaviour {
    Ok(Value),
    Fail(ErrorKind, bool),
    Panic,
    PanicEarly,
    SleepPastTimeout,
    TooBig,
    Cancel,
    FlakyThenOk(u32),
}

#[derive(Clone, Debug)]
struct Knobs {
    effect: Effect,
    idempotent: Option<bool>,
    retryable: Option<bool>,
    max_attempts: Option<u32>,
    timeout_ms: u64,
    max_output_bytes: u64,
    output_schema: bool,
    confirm: bool,
    approve: bool,
    permission: bool,
    grant: bool,
    unknown_tool: bool,
    bad_args: bool,
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9).prop_map(Value::from),
        "[a-zé€😀 ]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        3 => json_value().prop_map(Behaviour::Ok),
        3 => (prop::sample::select(ErrorKind::ALL.to_vec()), any::<bool>())
            .prop_map(|(k, r)| Behaviour::Fail(k, r)),
        1 => Just(Behaviour::Panic),
        1 => Just(Behaviour::PanicEarly),
        1 => Just(Behaviour::SleepPastTimeout),
        1 => Just(Behaviour::TooBig),
        1 => Just(Behaviour::Cancel),
        2 => (1u32..6).prop_map(Behaviour::FlakyThenOk),
    ]
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        (
            prop::sample::select(Effect::ALL.to_vec()),
            prop::option::of(any::<bool>()),
            prop::option::of(any::<bool>()),
            prop::option::of(1u32..=10),
            1000u64..=600_000,
            1024u64..=4096,
        ),
        (
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2),
            any::<bool>(),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.7),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.1),
        ),
    )
        .prop_map(
            |(
                (effect, idempotent, retryable, max_attempts, timeout_ms, max_output_bytes),
                (output_schema, confirm, approve, permission, grant, unknown_tool, bad_args),
            )| Knobs {
                effect,
                idempotent,
                retryable,
                max_attempts,
                timeout_ms,
                max_output_bytes,
                output_schema,
                confirm,
                approve,
                permission,
                grant,
                unknown_tool,
                bad_args,
            },
        )
}

/// Whether the pipeline's output cap cuts `v` at `max` bytes.
fn cut_by_cap(v: &Value, max: u64) -> bool {
    let max = usize::try_from(max).unwrap();
    match v {
        Value::String(s) => s.len() > max,
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
        other => other.to_string().len() > max,
    }
}

/// What the pipeline must answer: the error kind (or `None` for data), the number of attempts
/// and whether the output is truncated.
fn oracle(b: &Behaviour, k: &Knobs) -> (Option<ErrorKind>, u32, bool) {
    let max_attempts = k.max_attempts.unwrap_or(3);
    let idempotent = k.idempotent.unwrap_or(k.effect == Effect::Read);
    let may_retry = idempotent && k.retryable.unwrap_or(true);
    if k.unknown_tool {
        return (Some(ErrorKind::NotFound), 0, false);
    }
    if k.permission && !k.grant {
        return (Some(ErrorKind::Authorization), 0, false);
    }
    if k.bad_args {
        return (Some(ErrorKind::Validation), 0, false);
    }
    if k.confirm && !k.approve {
        return (Some(ErrorKind::ConfirmationRequired), 0, false);
    }
    let output = |v: &Value, attempts: u32| {
        if k.output_schema && !v.is_object() {
            (Some(ErrorKind::OutputInvalid), attempts, false)
        } else {
            (None, attempts, cut_by_cap(v, k.max_output_bytes))
        }
    };
    match b {
        Behaviour::Ok(v) => output(v, 1),
        Behaviour::Fail(kind, retryable) => {
            let attempts = if may_retry && *retryable {
                max_attempts
            } else {
                1
            };
            (Some(*kind), attempts, false)
        }
        Behaviour::Panic | Behaviour::PanicEarly => (Some(ErrorKind::Execution), 1, false),
        Behaviour::SleepPastTimeout => (Some(ErrorKind::Timeout), 1, false),
        Behaviour::Cancel => (Some(ErrorKind::Cancelled), 1, false),
        Behaviour::TooBig => output(&too_big(k.max_output_bytes), 1),
        Behaviour::FlakyThenOk(n) => {
            if may_retry && *n < max_attempts {
                output(&json!({"attempt": n + 1}), n + 1)
            } else {
                (
                    Some(ErrorKind::Unavailable),
                    if may_retry { max_attempts } else { 1 },
                    false,
                )
            }
        }
    }
}

fn too_big(max: u64) -> Value {
    // Three-byte characters after one ASCII byte: the cap lands inside a character.
    let n = usize::try_from(max).unwrap() / 3 + 10;
    json!(format!("x{}", "€".repeat(n)))
}

async fn run_case(b: Behaviour, k: Knobs) -> (ToolResult, &'static str) {
    let cancel = CancellationToken::new();
    let mut builder = ToolBuilder::new(
        "prop_tool",
        "A tool driven by the property test. Use in tests.",
    )
    .effect(k.effect)
    .param(
        Parameter::new("n", ParamType::Integer)
            .description("A number")
            .default_value(json!(1)),
    )
    .constraints(Constraints {
        timeout_ms: Some(k.timeout_ms),
        max_output_bytes: Some(k.max_output_bytes),
        retryable: k.retryable,
        max_attempts: k.max_attempts,
        ..Constraints::default()
    });
    if let Some(i) = k.idempotent {
        builder = builder.idempotent(i);
    }
    if k.output_schema {
        builder = builder.output_schema(json!({"type": "object"}));
    }
    if k.confirm {
        builder = builder.requires_confirmation(true);
    }
    if k.permission {
        builder = builder.permission("tool.prop.run");
    }
    let timeout = Duration::from_millis(k.timeout_ms);
    let max_output = k.max_output_bytes;
    let token = cancel.clone();
    let tool = builder.handler(move |_, ctx| {
        let b = b.clone();
        let token = token.clone();
        if matches!(b, Behaviour::PanicEarly) {
            panic!("property-test panic before the future");
        }
        async move {
            match b {
                Behaviour::Ok(v) => Ok(v),
                Behaviour::Fail(kind, retryable) => {
                    let e = ToolError::new(kind, format!("failed with {kind}"));
                    Err(if retryable {
                        e.retryable()
                    } else {
                        e.permanent()
                    })
                }
                Behaviour::Panic => panic!("property-test panic"),
                Behaviour::PanicEarly => Ok(json!("unreachable")),
                Behaviour::SleepPastTimeout => {
                    tokio::time::sleep(timeout + Duration::from_secs(1)).await;
                    Ok(json!("too late"))
                }
                Behaviour::TooBig => Ok(too_big(max_output)),
                Behaviour::Cancel => {
                    token.cancel();
                    std::future::pending::<()>().await;
                    Ok(json!("unreachable"))
                }
                Behaviour::FlakyThenOk(n) => {
                    if ctx.attempt() <= n {
                        Err(ToolError::unavailable("flaky backend"))
                    } else {
                        Ok(json!({"attempt": ctx.attempt()}))
                    }
                }
            }
        }
    });
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(tool)).unwrap();
    let approval: Arc<dyn toolgate_core::ApprovalHandler> = if k.approve {
        Arc::new(PreApproved)
    } else {
        Arc::new(AutoDeny::default())
    };
    let pipeline = PipelineBuilder::new(registry).approval(approval).build();
    let name = if k.unknown_tool {
        "unknown_tool"
    } else {
        "prop_tool"
    };
    let args = if k.bad_args {
        json!({"n": "not a number"})
    } else {
        json!({})
    };
    let mut who = Principal::new(PrincipalId::parse("prop").unwrap());
    if k.grant {
        who = who.grant(Permission::parse("tool.prop.run").unwrap());
    }
    let request = CallRequest::new(name, args)
        .principal(who)
        .cancel_token(cancel);
    (pipeline.call(request).await, name)
}

fn check_invariants(v: &Value, name: &str, max_attempts: u32) -> Result<(), TestCaseError> {
    let obj = v
        .as_object()
        .ok_or_else(|| TestCaseError::fail("not an object"))?;
    let has_data = obj.contains_key("data");
    let has_error = obj.contains_key("error");
    prop_assert!(has_data != has_error, "exactly one of data/error: {v}");
    prop_assert_eq!(
        obj.contains_key("errorKind"),
        has_error,
        "errorKind iff error: {}",
        v
    );
    if has_error {
        let message = obj["error"].as_str().unwrap_or_default();
        prop_assert!(!message.trim().is_empty(), "empty error message: {}", v);
        let kind = obj["errorKind"].as_str().unwrap_or_default();
        prop_assert!(ErrorKind::ALL.iter().any(|k| k.as_str() == kind), "{}", v);
    }
    prop_assert!(!obj.contains_key("success"));
    prop_assert_eq!(obj["tool"].as_str(), Some(name));
    let fetched = obj["fetchedAt"].as_str().unwrap_or_default();
    prop_assert_eq!(fetched.len(), 24, "fetchedAt {}", fetched);
    prop_assert!(
        fetched.ends_with('Z') && &fetched[19..20] == ".",
        "fetchedAt {}",
        fetched
    );
    prop_assert!(
        chrono::NaiveDateTime::parse_from_str(fetched, "%Y-%m-%dT%H:%M:%S%.3fZ").is_ok(),
        "fetchedAt {}",
        fetched
    );
    prop_assert!(CallId::parse(obj["callId"].as_str().unwrap_or_default()).is_ok());
    let attempts = obj["attempts"].as_u64();
    prop_assert!(
        attempts.is_some_and(|a| a <= u64::from(max_attempts)),
        "attempts: {}",
        v
    );
    prop_assert!(obj["durationMs"].as_f64().is_some_and(|d| d >= 0.0));
    prop_assert!(obj.contains_key("input"));
    if let Some(t) = obj.get("truncated") {
        prop_assert_eq!(t, &json!(true));
    }
    prop_assert!(!obj.contains_key("outputRef"));
    // Round trip through the wire form.
    let back: ToolResult = serde_json::from_value(v.clone())
        .map_err(|e| TestCaseError::fail(format!("does not read back: {e}")))?;
    prop_assert_eq!(&serde_json::to_value(&back).unwrap(), v);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn envelope_invariants_hold_for_random_outcomes(b in behaviour(), k in knobs()) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (want_kind, want_attempts, want_truncated) = oracle(&b, &k);
        // With the clock paused, a call that never ends fails after a virtual day, not hangs.
        let (result, name) = runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(24 * 3600), run_case(b.clone(), k.clone()))
                    .await
            })
            .map_err(|_| TestCaseError::fail(format!("the call never finished: {b:?} {k:?}")))?;
        let v = serde_json::to_value(&result).unwrap();
        check_invariants(&v, name, k.max_attempts.unwrap_or(3))?;
        prop_assert_eq!(result.error_kind(), want_kind, "{:?} {:?}: {}", b, k, v);
        prop_assert_eq!(result.attempts, want_attempts, "{:?} {:?}: {}", b, k, v);
        prop_assert_eq!(result.truncated, want_truncated, "{:?} {:?}: {}", b, k, v);
        if want_truncated {
            let data = result.data().and_then(Value::as_str).unwrap_or_default();
            prop_assert!(data.len() as u64 <= k.max_output_bytes);
            prop_assert!(!data.is_empty());
        }
        if let (Behaviour::Ok(value), None, false) = (&b, want_kind, want_truncated) {
            prop_assert_eq!(result.data(), Some(value));
        }
        if matches!(b, Behaviour::Cancel) && want_kind == Some(ErrorKind::Cancelled) {
            prop_assert_eq!(result.error(), Some("Request was cancelled"));
        }
    }
}

/// A panicking handler's envelope is an `execution` error that says it panicked (an MCP task
/// reads it `failed`); the tool's own execution error, whatever it says, is not a panic.
#[tokio::test]
async fn a_panicking_handler_is_told_apart_from_a_tool_error() {
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(
            ToolBuilder::new("boom", "Panics; for tests.").handler(|_, _| async {
                if std::hint::black_box(true) {
                    panic!("boom");
                }
                Ok(Value::Null)
            }),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            ToolBuilder::new("fails", "Fails; for tests.").handler(|_, _| async {
                Err(ToolError::execution("it panicked: no, it only failed"))
            }),
        ))
        .unwrap();
    let pipeline = PipelineBuilder::new(registry).build();
    let boom = pipeline.call(CallRequest::new("boom", json!({}))).await;
    assert_eq!(boom.error_kind(), Some(ErrorKind::Execution));
    assert!(boom.panicked(), "{boom:?}");
    let fails = pipeline.call(CallRequest::new("fails", json!({}))).await;
    assert_eq!(fails.error_kind(), Some(ErrorKind::Execution));
    assert!(!fails.panicked(), "{fails:?}");
    assert!(!result(Outcome::Data(json!(1))).panicked());
}
