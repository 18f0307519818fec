//! The `command` run kind: a declared program run with an argument list (never a shell string),
//! the arguments also as JSON on stdin, stdout as the result (`text` or `json`), inside the
//! sandbox the definition's `constraints.isolation` asks for, with `[run.sandbox]` allow-lists.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{
    BoxFuture, Issue, RunKind, Tool, ToolContext, ToolDefinition, ToolError, ToolOutput,
    parse_host_port,
};

/// The `kind` value.
pub const COMMAND_KIND: &str = "command";

const SETTINGS: &[&str] = &["program", "args", "env", "output", "sandbox"];
const SANDBOX_SETTINGS: &[&str] = &["read_paths", "write_paths", "allowed_hosts"];

/// One element of `args`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Passed as written.
    Literal(String),
    /// `"{name}"`: the parameter's value as one argument (an array: one argument per element);
    /// left out when the parameter is absent.
    Param(String),
}

/// What stdout becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// The text, with one trailing newline removed.
    Text,
    /// Parsed as one JSON value.
    Json,
}

/// A checked `[run]` section of kind `command`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandPlan {
    /// The absolute path of the program.
    pub program: PathBuf,
    /// The argument list; `{param}` elements become one argument each.
    pub args: Vec<Arg>,
    /// Names of toolgate's environment variables passed on to the program.
    pub env: Vec<String>,
    /// What stdout becomes.
    pub output: OutputMode,
    /// Paths the program may read (`[run.sandbox] read_paths`).
    pub read_paths: Vec<PathBuf>,
    /// Paths the program may write (`[run.sandbox] write_paths`).
    pub write_paths: Vec<PathBuf>,
    /// `(host, port)`.
    pub allowed_hosts: Vec<(String, u16)>,
}

fn issue(out: &mut Vec<Issue>, path: impl Into<String>, code: &str, message: impl Into<String>) {
    out.push(Issue {
        path: path.into(),
        code: code.into(),
        message: message.into(),
    });
}

/// Parameters the definition declares (typed list or input schema).
fn parameter_names(def: &ToolDefinition) -> Vec<String> {
    let mut names: Vec<String> = def.parameters.iter().map(|p| p.name.clone()).collect();
    if let Some(Value::Object(schema)) = &def.input_schema
        && let Some(Value::Object(props)) = schema.get("properties")
    {
        names.extend(props.keys().cloned());
    }
    names
}

fn absolute_clean(s: &str) -> Option<PathBuf> {
    let p = Path::new(s);
    let clean = p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    clean.then(|| p.to_path_buf())
}

fn strings(v: &Value) -> Option<Vec<&str>> {
    v.as_array()?.iter().map(Value::as_str).collect()
}

fn paths(v: Option<&Value>, at: &str, out: &mut Vec<Issue>) -> Vec<PathBuf> {
    let Some(v) = v else { return Vec::new() };
    let Some(list) = strings(v) else {
        issue(
            out,
            at,
            "run.sandbox_paths",
            "Expected a list of absolute paths, like [\"/srv/data\"]",
        );
        return Vec::new();
    };
    let mut paths = Vec::new();
    for (i, s) in list.into_iter().enumerate() {
        match absolute_clean(s) {
            Some(p) => paths.push(p),
            None => issue(
                out,
                format!("{at}[{i}]"),
                "run.sandbox_path",
                format!("Path {s:?} must be absolute and contain no `.` or `..` components"),
            ),
        }
    }
    paths
}

impl CommandPlan {
    /// Checks a definition's run section; every problem at once, paths under `run.`.
    pub fn parse(def: &ToolDefinition) -> Result<Self, Vec<Issue>> {
        let mut out = Vec::new();
        let Some(run) = &def.run else {
            issue(
                &mut out,
                "run",
                "run.missing",
                "A command tool needs a [run] section",
            );
            return Err(out);
        };
        let s = &run.settings;
        for key in s.keys() {
            if !SETTINGS.contains(&key.as_str()) {
                issue(
                    &mut out,
                    format!("run.{key}"),
                    "run.unknown_setting",
                    format!(
                        "Unknown setting {key:?} for kind \"command\"; expected one of {}",
                        SETTINGS.join(", ")
                    ),
                );
            }
        }
        let program = match s.get("program").and_then(Value::as_str) {
            Some(p) => match absolute_clean(p) {
                Some(p) => p,
                None => {
                    issue(
                        &mut out,
                        "run.program",
                        "run.program_path",
                        format!(
                            "Program {p:?} must be an absolute path without `.` or `..` (no PATH lookup, no shell)"
                        ),
                    );
                    PathBuf::new()
                }
            },
            None => {
                issue(
                    &mut out,
                    "run.program",
                    "run.program_missing",
                    "Set run.program to the absolute path of the program, like \"/usr/bin/wc\"",
                );
                PathBuf::new()
            }
        };
        let known = parameter_names(def);
        let mut args = Vec::new();
        match s.get("args") {
            None => {}
            Some(v) => match strings(v) {
                None => issue(
                    &mut out,
                    "run.args",
                    "run.args_type",
                    "run.args must be a list of strings; \"{param}\" passes a parameter as one argument",
                ),
                Some(list) => {
                    for (i, a) in list.into_iter().enumerate() {
                        let param = a.strip_prefix('{').and_then(|r| r.strip_suffix('}'));
                        match param {
                            Some(name) if known.iter().any(|k| k == name) => {
                                args.push(Arg::Param(name.to_owned()))
                            }
                            Some(name) => issue(
                                &mut out,
                                format!("run.args[{i}]"),
                                "run.args_unknown_param",
                                format!(
                                    "Argument \"{{{name}}}\" names no parameter of this tool; declared: {}",
                                    if known.is_empty() {
                                        "none".to_owned()
                                    } else {
                                        known.join(", ")
                                    }
                                ),
                            ),
                            None if a.contains('{') || a.contains('}') => issue(
                                &mut out,
                                format!("run.args[{i}]"),
                                "run.args_partial",
                                format!(
                                    "Argument {a:?} mixes text and a parameter; a parameter must be a whole element, like [\"--file\", \"{{path}}\"]"
                                ),
                            ),
                            None => args.push(Arg::Literal(a.to_owned())),
                        }
                    }
                }
            },
        }
        let mut env = Vec::new();
        if let Some(v) = s.get("env") {
            match strings(v) {
                Some(list) => {
                    for (i, name) in list.into_iter().enumerate() {
                        let ok = !name.is_empty()
                            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                            && !name.starts_with(|c: char| c.is_ascii_digit());
                        if ok {
                            env.push(name.to_owned());
                        } else {
                            issue(
                                &mut out,
                                format!("run.env[{i}]"),
                                "run.env_name",
                                format!(
                                    "{name:?} is not an environment variable name (letters, digits, _)"
                                ),
                            );
                        }
                    }
                }
                None => issue(
                    &mut out,
                    "run.env",
                    "run.env_type",
                    "run.env must be a list of variable names passed through from toolgate's environment",
                ),
            }
        }
        let output = match s.get("output").map(|v| v.as_str()) {
            None | Some(Some("text")) => OutputMode::Text,
            Some(Some("json")) => OutputMode::Json,
            Some(_) => {
                issue(
                    &mut out,
                    "run.output",
                    "run.output",
                    "run.output must be \"text\" or \"json\"",
                );
                OutputMode::Text
            }
        };
        let empty = serde_json::Map::new();
        let sandbox = match s.get("sandbox") {
            None => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => {
                issue(
                    &mut out,
                    "run.sandbox",
                    "run.sandbox_type",
                    "run.sandbox must be a table with read_paths, write_paths and allowed_hosts",
                );
                &empty
            }
        };
        for key in sandbox.keys() {
            if !SANDBOX_SETTINGS.contains(&key.as_str()) {
                issue(
                    &mut out,
                    format!("run.sandbox.{key}"),
                    "run.unknown_setting",
                    format!(
                        "Unknown sandbox setting {key:?}; expected one of {}",
                        SANDBOX_SETTINGS.join(", ")
                    ),
                );
            }
        }
        let read_paths = paths(
            sandbox.get("read_paths"),
            "run.sandbox.read_paths",
            &mut out,
        );
        let write_paths = paths(
            sandbox.get("write_paths"),
            "run.sandbox.write_paths",
            &mut out,
        );
        let mut allowed_hosts = Vec::new();
        if let Some(v) = sandbox.get("allowed_hosts") {
            match strings(v) {
                None => issue(
                    &mut out,
                    "run.sandbox.allowed_hosts",
                    "run.sandbox_hosts",
                    "allowed_hosts must be a list of \"host:port\"",
                ),
                Some(list) => {
                    for (i, h) in list.into_iter().enumerate() {
                        match parse_host_port(h) {
                            Some(hp) => allowed_hosts.push(hp),
                            None => issue(
                                &mut out,
                                format!("run.sandbox.allowed_hosts[{i}]"),
                                "run.sandbox_host",
                                format!(
                                    "{h:?} is not \"host:port\" (a DNS name or IPv4 address, and a port 1-65535)"
                                ),
                            ),
                        }
                    }
                }
            }
        }
        if allowed_hosts.len() > 200 {
            issue(
                &mut out,
                "run.sandbox.allowed_hosts",
                "run.sandbox_hosts",
                "At most 200 allowed hosts",
            );
        }
        if out.is_empty() {
            Ok(Self {
                program,
                args,
                env,
                output,
                read_paths,
                write_paths,
                allowed_hosts,
            })
        } else {
            Err(out)
        }
    }

    /// The program's arguments for one call.
    pub fn argv(&self, input: &Value) -> Vec<String> {
        let mut argv = Vec::new();
        for a in &self.args {
            match a {
                Arg::Literal(s) => argv.push(s.clone()),
                Arg::Param(name) => match input.get(name) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(items)) => argv.extend(items.iter().map(scalar)),
                    Some(v) => argv.push(scalar(v)),
                },
            }
        }
        argv
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `command` run kind. Its handler refuses to run outside the sandbox executor: a command
/// tool only ever runs through [`crate::SandboxExecutor`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CommandKind;

struct CommandTool {
    definition: ToolDefinition,
}

impl Tool for CommandTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, _args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        let name = self.definition.name.clone();
        Box::pin(async move {
            Err(ToolError::unavailable(format!(
                "Tool {name} is a command tool; it runs only under toolgate's sandbox executor, which this pipeline does not use"
            ))
            .permanent())
        })
    }
}

impl RunKind for CommandKind {
    fn kind(&self) -> &'static str {
        COMMAND_KIND
    }

    fn prepare(&self, def: &ToolDefinition) -> Result<Arc<dyn Tool>, Vec<Issue>> {
        CommandPlan::parse(def)?;
        Ok(Arc::new(CommandTool {
            definition: def.clone(),
        }))
    }
}

/// Plans by definition hash, so a call does not re-parse its run section.
#[derive(Default)]
pub(crate) struct PlanCache(std::sync::Mutex<BTreeMap<String, Arc<CommandPlan>>>);

impl PlanCache {
    pub(crate) fn get(
        &self,
        hash: &str,
        def: &ToolDefinition,
    ) -> Result<Arc<CommandPlan>, ToolError> {
        if let Ok(map) = self.0.lock()
            && let Some(p) = map.get(hash)
        {
            return Ok(Arc::clone(p));
        }
        let plan = CommandPlan::parse(def).map(Arc::new).map_err(|issues| {
            ToolError::execution(format!(
                "Tool {} has an invalid run section: {}",
                def.name,
                issues
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
            .permanent()
        })?;
        if let Ok(mut map) = self.0.lock() {
            if map.len() > 4096 {
                map.clear();
            }
            map.insert(hash.to_owned(), Arc::clone(&plan));
        }
        Ok(plan)
    }
}
