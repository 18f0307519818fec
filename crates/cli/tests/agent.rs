//! `toolgate agent run` end to end: the real binary against fake model APIs on 127.0.0.1
//! (`toolgate_test_support::fake_llm`, which refuse what the real OpenAI and Anthropic APIs
//! refuse), scripting a model that calls tools in parallel, repeats a failing call, never stops,
//! is too slow, or calls a tool that needs confirmation. Transcripts are snapshots.
#![cfg(test)]

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_test_support::cli::Toolgate;
use toolgate_test_support::fake_llm::{Api, FakeModel, KEY, Script, Turn};

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn toolgate(&self) -> Toolgate {
        Toolgate::new(BIN, self.dir.path()).with_sqlite("state/toolgate.db")
    }

    /// `toolgate agent run` against `model` with `args` after the model flags, no terminal.
    fn agent(&self, api: Api, model: &FakeModel, args: &[&str]) -> Output {
        self.agent_command(api, model, args).output().unwrap()
    }

    /// The `toolgate agent run` command of [`Case::agent`], to run as the test needs.
    fn agent_command(&self, api: Api, model: &FakeModel, args: &[&str]) -> Command {
        let (name, var, other) = match api {
            Api::OpenAi => ("openai:fake-gpt", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"),
            Api::Anthropic => (
                "anthropic:fake-claude",
                "ANTHROPIC_API_KEY",
                "OPENAI_API_KEY",
            ),
        };
        let base = model.base_url();
        let mut command = self.toolgate().command();
        command
            .args(["agent", "run", "--model", name, "--base-url", &base])
            .args(args)
            .env(var, KEY)
            .env_remove(other)
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.toolgate()
            .command()
            .args(args)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn expect(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
}

/// Run ids, approval ids, ports and times differ from run to run.
fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[uuid]",
        ),
        (r"apr_[0-9a-f]{32}", "apr_[id]"),
        (r"127\.0\.0\.1:\d+", "127.0.0.1:[port]"),
        (r"\d+ ms", "[n] ms"),
        (r#""elapsedMs": \d+"#, r#""elapsedMs": "[n]""#),
    ]
}

fn script(f: impl Fn(usize, &Value) -> Turn + Send + Sync + 'static) -> Script {
    Arc::new(f)
}

fn parallel_then_answer() -> Script {
    script(|turn, _| match turn {
        0 => Turn::calls(&[
            ("calculator", json!({"expression": "17 * 23"})),
            ("calculator", json!({"expression": "2^10"})),
        ]),
        _ => Turn::answer("17 × 23 = 391 and 2^10 = 1024."),
    })
}

const PROMPT: &str = "What are 17 * 23 and 2^10?";

/// The prefix of a provider's snapshot names.
fn provider(api: Api) -> &'static str {
    match api {
        Api::OpenAi => "openai",
        Api::Anthropic => "anthropic",
    }
}

#[test]
fn parallel_calls_then_an_answer() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let case = Case::new();
        let model = FakeModel::start(api, parallel_then_answer());
        let out = case.agent(api, &model, &["--tool", "calculator", "--prompt", PROMPT]);
        expect(&out, 0);
        let name = format!("{}_parallel_human", provider(api));
        insta::with_settings!({filters => filters()}, {
            insta::assert_snapshot!(name, stdout(&out));
        });
        // The second request carries both results, each after its call.
        let requests = model.requests();
        assert_eq!(requests.len(), 2);
        match api {
            Api::OpenAi => {
                let messages = requests[1]["messages"].as_array().unwrap();
                let tool: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
                assert_eq!(tool.len(), 2);
                assert_eq!(tool[0]["tool_call_id"], "call_0_0");
                assert!(tool[0]["content"].as_str().unwrap().contains("391"));
                assert!(tool[1]["content"].as_str().unwrap().contains("1024"));
            }
            Api::Anthropic => {
                let results = &requests[1]["messages"][2]["content"];
                assert_eq!(results[0]["type"], "tool_result");
                assert_eq!(results[0]["tool_use_id"], "toolu_0_0");
                assert_eq!(results[1]["tool_use_id"], "toolu_0_1");
                assert!(results[0].get("is_error").is_none());
            }
        }

        // --json: the whole exchange.
        let model = FakeModel::start(api, parallel_then_answer());
        let out = case.agent(
            api,
            &model,
            &["--tool", "calculator", "--prompt", PROMPT, "--json"],
        );
        expect(&out, 0);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["end"]["state"], "answer");
        assert_eq!(v["consumption"]["turns"], 2);
        assert_eq!(v["consumption"]["toolCalls"], 2);
        assert_eq!(v["consumption"]["status"], "finished");
        let name = format!("{}_parallel_json", provider(api));
        insta::with_settings!({filters => filters()}, {
            insta::assert_snapshot!(name, stdout(&out));
        });
        // The run is in the store, with its calls.
        let run_id = v["runId"].as_str().unwrap();
        let shown = case.run(&["runs", "show", run_id]);
        expect(&shown, 0);
        assert!(stdout(&shown).contains("calculator"), "{}", stdout(&shown));
    }
}

fn always_failing() -> Script {
    script(|_, _| Turn::calls(&[("calculator", json!({"expression": "2 +"}))]))
}

#[test]
fn a_repeated_failing_call_stops_at_the_third_failure() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let case = Case::new();
        let model = FakeModel::start(api, always_failing());
        let out = case.agent(
            api,
            &model,
            &["--tool", "calculator", "--prompt", "Compute 2 +"],
        );
        expect(&out, 4);
        let text = stdout(&out);
        assert!(text.contains("max_attempts_per_tool"), "{text}");
        // Three model turns, each error fed back before the next.
        let requests = model.requests();
        assert_eq!(requests.len(), 3, "{text}");
        if api == Api::Anthropic {
            let result = &requests[1]["messages"][2]["content"][0];
            assert_eq!(result["is_error"], true, "{result}");
            assert!(
                result["content"]
                    .as_str()
                    .unwrap()
                    .contains("Invalid expression")
            );
        } else {
            let result = &requests[1]["messages"][2];
            assert!(result["content"].as_str().unwrap().contains("errorKind"));
        }
        let name = format!("{}_failing_human", provider(api));
        insta::with_settings!({filters => filters()}, {
            insta::assert_snapshot!(name, text);
        });
    }
}

fn forever() -> Script {
    script(|turn, _| Turn::calls(&[("calculator", json!({"expression": format!("{turn} + 1")}))]))
}

#[test]
fn a_model_that_never_answers_stops_at_max_turns() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let case = Case::new();
        let model = FakeModel::start(api, forever());
        let out = case.agent(
            api,
            &model,
            &[
                "--tool",
                "calculator",
                "--max-turns",
                "3",
                "--prompt",
                "Count up forever",
            ],
        );
        expect(&out, 4);
        let text = stdout(&out);
        assert!(
            text.contains("the run used 3 of its 3 model turns (max_turns)"),
            "{text}"
        );
        assert_eq!(model.requests().len(), 3);
        if api == Api::OpenAi {
            insta::with_settings!({filters => filters()}, {
                insta::assert_snapshot!("openai_max_turns_human", text);
            });
        }
    }
}

#[test]
fn a_model_that_keeps_calling_stops_at_max_tool_calls() {
    let case = Case::new();
    let model = FakeModel::start(Api::OpenAi, forever());
    let out = case.agent(
        Api::OpenAi,
        &model,
        &[
            "--tool",
            "calculator",
            "--max-tool-calls",
            "2",
            "--prompt",
            "Count up forever",
            "--json",
        ],
    );
    expect(&out, 4);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["end"]["budget"], "max_tool_calls", "{v:#}");
    let message = v["end"]["message"].as_str().unwrap();
    assert!(
        message.contains("2 of its 2 tool calls (max_tool_calls)"),
        "{message}"
    );
    // The third call was refused by the pipeline with budget_exhausted.
    let last = &v["entries"][6]["results"][0];
    assert_eq!(last["errorKind"], "budget_exhausted", "{v:#}");
}

#[test]
fn a_slow_model_stops_at_timeout_ms() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let case = Case::new();
        let model = FakeModel::start(
            api,
            script(|turn, _| {
                Turn::calls(&[("calculator", json!({"expression": format!("{turn} * 2")}))])
                    .after(Duration::from_millis(400))
            }),
        );
        let out = case.agent(
            api,
            &model,
            &[
                "--tool",
                "calculator",
                "--timeout-ms",
                "1000",
                "--prompt",
                "Take your time",
                "--json",
            ],
        );
        expect(&out, 4);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["end"]["state"], "budget_exhausted");
        assert_eq!(v["end"]["budget"], "timeout_ms", "{v:#}");
        let message = v["end"]["message"].as_str().unwrap();
        assert!(message.contains("of its 1000 ms (timeout_ms)"), "{message}");
        assert_eq!(v["consumption"]["status"], "finished");
    }
}

#[test]
fn a_tool_that_needs_confirmation_without_a_terminal_leaves_an_approval_and_exits_3() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let case = Case::new();
        let model = FakeModel::start(
            api,
            script(|_, _| {
                Turn::calls(&[("write_file", json!({"path": "out.txt", "content": "hello"}))])
            }),
        );
        let out = case.agent(
            api,
            &model,
            &["--tool", "write_file", "--prompt", "Write hello to out.txt"],
        );
        expect(&out, 3);
        let text = stdout(&out);
        assert!(text.contains("approval pending"), "{text}");
        assert!(text.contains("toolgate approvals approve"), "{text}");
        assert!(
            !case.dir.path().join("out.txt").exists(),
            "nothing runs unapproved"
        );
        let pending = case.run(&["approvals", "list"]);
        expect(&pending, 0);
        assert!(stdout(&pending).contains("pending"), "{}", stdout(&pending));
        if api == Api::Anthropic {
            insta::with_settings!({filters => filters()}, {
                insta::assert_snapshot!("anthropic_approval_human", text);
            });
        }
    }
}

#[test]
fn on_a_terminal_a_confirmation_is_asked_and_a_no_is_fed_back() {
    // `script` gives the binary a real terminal on stdin, as a person would have.
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipping: util-linux `script` is not installed");
        return;
    }
    for (answer, written) in [("y", true), ("n", false)] {
        let case = Case::new();
        let model = FakeModel::start(
            Api::Anthropic,
            script(|turn, _| match turn {
                0 => Turn::calls(&[("write_file", json!({"path": "out.txt", "content": "hi"}))]),
                _ => Turn::answer("Done."),
            }),
        );
        let cmd = format!(
            "{BIN} agent run --model anthropic:fake --base-url {} --tool write_file --prompt 'Write hi'",
            model.base_url()
        );
        let out = case
            .toolgate()
            .wrapped("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("ANTHROPIC_API_KEY", KEY)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                // Give the prompt time to appear, then answer.
                std::thread::sleep(Duration::from_millis(1500));
                std::io::Write::write_all(
                    &mut child.stdin.take().unwrap(),
                    format!("{answer}\n").as_bytes(),
                )?;
                child.wait_with_output()
            })
            .unwrap();
        let text = stdout(&out);
        assert!(text.contains("[y/N]"), "no prompt shown: {text}");
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert_eq!(case.dir.path().join("out.txt").exists(), written, "{text}");
        // The decision goes back to the model as the call's result.
        let requests = model.requests();
        let result = &requests[1]["messages"][2]["content"][0];
        assert_eq!(result.get("is_error").is_some(), !written, "{result}");
    }
}

#[test]
fn every_tool_the_principal_sees_is_accepted_by_both_apis() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let case = Case::new();
        let model = FakeModel::start(api, script(|_, _| Turn::answer("Nothing to do.")));
        let out = case.agent(api, &model, &["--prompt", "Say hi", "--json"]);
        expect(&out, 0);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let tools = v["tools"].as_array().unwrap();
        assert!(tools.len() > 5, "{tools:?}");
        let sent = model.requests()[0]["tools"].as_array().unwrap().len();
        assert_eq!(sent, tools.len());
    }
}

#[test]
fn usage_errors_exit_2_and_name_the_fix() {
    let case = Case::new();
    let out = case.run(&[
        "agent",
        "run",
        "--model",
        "openai:gpt-4.1",
        "--prompt",
        "hi",
    ]);
    expect(&out, 2);
    assert!(
        stderr(&out).contains("OPENAI_API_KEY is not set"),
        "{}",
        stderr(&out)
    );
    let out = case.run(&["agent", "run", "--model", "gemini:x", "--prompt", "hi"]);
    expect(&out, 2);
    assert!(stderr(&out).contains("openai:NAME or anthropic:NAME"));
    // A budget flag may tighten the principal's budget, never loosen it.
    std::fs::write(
        case.dir.path().join("toolgate.toml"),
        "[budget]\nmax_turns = 5\n",
    )
    .unwrap();
    let model = FakeModel::start(Api::OpenAi, script(|_, _| Turn::answer("hi")));
    let out = case.agent(
        Api::OpenAi,
        &model,
        &[
            "--config",
            "toolgate.toml",
            "--max-turns",
            "10",
            "--prompt",
            "hi",
        ],
    );
    expect(&out, 2);
    assert!(
        stderr(&out).contains("max_turns 10 is looser"),
        "{}",
        stderr(&out)
    );
    assert!(model.requests().is_empty());
    // The key is never printed, not even in an error.
    let out = case.agent(Api::OpenAi, &model, &["--tool", "nope", "--prompt", "hi"]);
    expect(&out, 2);
    assert!(!stderr(&out).contains(KEY) && !stdout(&out).contains(KEY));
}

#[test]
fn ctrl_c_cancels_the_model_request_and_finishes_the_run() {
    let case = Case::new();
    let model = FakeModel::start(
        Api::OpenAi,
        script(|_, _| Turn::answer("too late").after(Duration::from_secs(20))),
    );
    let child = case
        .agent_command(Api::OpenAi, &model, &["--prompt", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the request is in flight, interrupt as a terminal's Ctrl-C would.
    let start = std::time::Instant::now();
    while model.requests().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no request reached the model"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    expect(&out, 1);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the request was not dropped"
    );
    assert!(
        stdout(&out).contains("Stopped, cancelled"),
        "{}",
        stdout(&out)
    );
    let runs = case.run(&["runs", "list", "--json"]);
    expect(&runs, 0);
    let runs: Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(runs["runs"][0]["status"], "finished", "{runs:#}");
}

#[test]
fn an_unreachable_model_exits_1() {
    let case = Case::new();
    let model = FakeModel::start(Api::OpenAi, script(|_, _| Turn::answer("hi")));
    let mut command = case.agent_command(Api::OpenAi, &model, &["--prompt", "hi"]);
    drop(model);
    let out = command.output().unwrap();
    expect(&out, 1);
    assert!(
        stderr(&out).contains("cannot reach the model"),
        "{}",
        stderr(&out)
    );
}
