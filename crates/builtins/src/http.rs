//! The `http` run kind: a definition file turns an HTTP API into a governed tool, no code.
//!
//! ```toml
//! [run]
//! kind = "http"
//! method = "GET"                                   # GET (default), POST, PUT, PATCH, DELETE, HEAD
//! url = "https://api.example.com/v1/cities/{city}/weather"
//! query = ["units"]                                # or { units = "{units}", lang = "en" }
//! headers = { Authorization = "Bearer ${env:WEATHER_TOKEN}" }
//! expect_status = [200]                            # default: any 2xx
//! response = "/current"                            # a JSON pointer, or a projection:
//! # [run.response]
//! # temperature = "/current/temp_c"
//! # [run.pagination]                               # an API that pages with a cursor:
//! # next_cursor = "/meta/next"                     # where the response holds the next one
//! # cursor_param = "cursor"                        # the parameter that sends it (default)
//! ```
//!
//! Rules, checked when the definition is registered (every problem at once, under `run.`):
//! - `{param}` placeholders name declared parameters; their values are percent-encoded. The
//!   scheme, host and port are literal (a model cannot choose where the request goes), and a
//!   placeholder in `url` needs a parameter that is always present (required or defaulted).
//!   `{{` and `}}` write literal braces.
//! - `${env:NAME}` reads a secret from toolgate's environment when the call runs; it may appear
//!   in `headers`, `query` and `body`, never in `url` (URLs appear in messages). Secrets are
//!   never logged and never part of the definition's stored text beyond their variable name.
//! - `query`: a list of parameter names (`name={name}`), or a table of templates; a pair whose
//!   parameters are absent from the call is left out.
//! - `body` (not with GET/HEAD): a list of parameter names (a JSON object of those arguments),
//!   or a JSON template: a string that is exactly `"{param}"` becomes the argument's JSON value
//!   (left out when absent), other strings are filled in as text.
//! - The response: JSON is mapped by `response` (whole body when absent; a missing pointer is
//!   `null` in a projection and an error for a single pointer); a non-JSON body becomes
//!   `{"text": ...}`.
//! - `pagination`: `next_cursor` is a JSON pointer into the response body where the API puts
//!   the next page's cursor; `cursor_param` (default `cursor`) names an optional parameter,
//!   without a default, that the definition passes to the request in `query`, `headers` or
//!   `body` (e.g. `query = { page_token = "{cursor}" }`). The result carries `nextCursor` when
//!   the pointer holds a value (not null, not ""): an opaque token bound to this tool that wraps
//!   the API's cursor. The next call passes it back as the cursor parameter; toolgate unwraps it
//!   and sends the API's own value. A token that was changed or made by another tool is a
//!   `validation` error and no request is made. A result that is not a JSON object becomes
//!   `{"items": <result>}` so it has room for `nextCursor`; an output schema that refuses
//!   unknown properties must declare `nextCursor`.
//! - A status outside `expect_status` is an error: 401/403 `authorization`, 429 `rate_limited`,
//!   5xx `unavailable` (retried when the tool is retryable and idempotent), others `execution`,
//!   each with the status and the start of the body.
//!
//! Every request goes through the context's HTTP client, so the network policy, the tool's
//! timeout and cancellation, and the pipeline's retries apply.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};
use toolgate_core::{
    BoxFuture, ErrorKind, HttpRequest, Issue, RunKind, Tool, ToolContext, ToolDefinition,
    ToolError, ToolOutput,
};

use crate::cursor;

/// The run kind's name.
pub const HTTP_KIND: &str = "http";

/// Characters kept as they are in a substituted value: RFC 3986 unreserved.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

const SETTINGS: &[&str] = &[
    "method",
    "url",
    "headers",
    "query",
    "body",
    "expect_status",
    "response",
    "pagination",
];
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];

/// Where `${env:NAME}` values come from.
type Secrets = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Installs on a registry with `registry.add_run_kind(Arc::new(HttpKind::new()))`.
#[derive(Clone)]
pub struct HttpKind {
    secrets: Secrets,
}

impl Default for HttpKind {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for HttpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpKind")
    }
}

impl HttpKind {
    /// `${env:NAME}` reads toolgate's process environment.
    pub fn new() -> Self {
        Self::with_secrets(|name| std::env::var(name).ok())
    }

    /// `${env:NAME}` reads `lookup(NAME)` instead (a secret store, or a table in tests).
    pub fn with_secrets(lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self {
            secrets: Arc::new(lookup),
        }
    }
}

impl RunKind for HttpKind {
    fn kind(&self) -> &'static str {
        HTTP_KIND
    }

    fn prepare(&self, def: &ToolDefinition) -> Result<Arc<dyn Tool>, Vec<Issue>> {
        let plan = HttpPlan::parse(def)?;
        Ok(Arc::new(HttpTool {
            definition: def.clone(),
            plan: Arc::new(plan),
            secrets: Arc::clone(&self.secrets),
        }))
    }
}

/// A piece of a template.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Param(String),
    Env(String),
}

#[derive(Clone, Debug, PartialEq)]
struct Template(Vec<Piece>);

impl Template {
    fn parse(raw: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = raw.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().is_some_and(|(_, n)| *n == '{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek().is_some_and(|(_, n)| *n == '}') => {
                    chars.next();
                    text.push('}');
                }
                '$' if raw[i..].starts_with("${env:") => {
                    let rest = &raw[i + 6..];
                    let end = rest
                        .find('}')
                        .ok_or("an ${env:NAME} reference is not closed with }")?;
                    let name = &rest[..end];
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return Err(format!(
                            "{name:?} is not an environment variable name (letters, digits, _)"
                        ));
                    }
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(Piece::Env(name.to_owned()));
                    for _ in 0..end + 6 {
                        chars.next();
                    }
                }
                '{' => {
                    let rest = &raw[i + 1..];
                    let end = rest.find('}').ok_or(
                        "a {placeholder} is not closed with } (write {{ for a literal brace)",
                    )?;
                    let name = &rest[..end];
                    if name.is_empty()
                        || !name
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    {
                        return Err(format!(
                            "{{{name}}} is not a parameter placeholder; parameter names are snake_case (write {{{{ for a literal brace)"
                        ));
                    }
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(Piece::Param(name.to_owned()));
                    for _ in 0..=end {
                        chars.next();
                    }
                }
                '}' => return Err("a lone } (write }} for a literal brace)".into()),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Self(pieces))
    }

    fn params(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|p| match p {
            Piece::Param(n) => Some(n.as_str()),
            _ => None,
        })
    }

    fn has_env(&self) -> bool {
        self.0.iter().any(|p| matches!(p, Piece::Env(_)))
    }

    /// The filled-in text; `None` when a parameter is absent from `args`.
    fn render(
        &self,
        args: &Map<String, Value>,
        encode: bool,
        scope: &RenderScope<'_>,
    ) -> Result<Option<String>, ToolError> {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Param(name) => match args.get(name) {
                    None | Some(Value::Null) => return Ok(None),
                    Some(v) => {
                        let text = scalar_text(v);
                        if encode && (text == "." || text == "..") {
                            // A lone dot segment would walk the path up a level.
                            out.push_str(&text.replace('.', "%2E"));
                        } else if encode {
                            out.extend(utf8_percent_encode(&text, COMPONENT));
                        } else {
                            out.push_str(&text);
                        }
                    }
                },
                Piece::Env(name) => out.push_str(&scope.secret(name)?),
            }
        }
        Ok(Some(out))
    }
}

/// What rendering needs besides the arguments: the tool's name and where secrets come from.
struct RenderScope<'a> {
    tool: &'a str,
    secrets: &'a Secrets,
}

impl RenderScope<'_> {
    fn secret(&self, name: &str) -> Result<String, ToolError> {
        match (self.secrets)(name) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(ToolError::unavailable(format!(
                "Tool {} needs the environment variable {name}, which is not set; set it where toolgate runs and restart",
                self.tool
            ))
            .permanent()),
        }
    }
}

/// An argument as text: strings as they are, arrays as comma-separated items, objects as JSON.
fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(items) => items.iter().map(scalar_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Body {
    Pick(Vec<String>),
    Template(Value),
}

#[derive(Clone, Debug, PartialEq)]
enum Mapping {
    Whole,
    Pointer(String),
    Fields(Vec<(String, String)>),
}

/// A checked `run.pagination`: where the next cursor is and which parameter sends it.
#[derive(Clone, Debug, PartialEq)]
struct Pagination {
    next_cursor: String,
    param: String,
}

/// The parameter that carries the cursor when `cursor_param` is not given.
const DEFAULT_CURSOR_PARAM: &str = "cursor";

/// A checked run section.
#[derive(Clone, Debug)]
struct HttpPlan {
    method: String,
    url: Template,
    headers: Vec<(String, Template)>,
    query: Vec<(String, Template)>,
    body: Option<Body>,
    expect: Option<Vec<u16>>,
    response: Mapping,
    pagination: Option<Pagination>,
}

/// Parameters a call may carry, and whether each is always present (required or defaulted).
fn parameters(def: &ToolDefinition) -> BTreeMap<String, bool> {
    let mut known = BTreeMap::new();
    for p in &def.parameters {
        let always = p.required || def.required.contains(&p.name) || p.default.is_some();
        known.insert(p.name.clone(), always);
    }
    if let Some(Value::Object(schema)) = &def.input_schema {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (name, prop) in props {
                let always = required.contains(&name.as_str()) || prop.get("default").is_some();
                known.insert(name.clone(), always);
            }
        }
    }
    known
}

struct Problems(Vec<Issue>);

impl Problems {
    fn add(&mut self, path: impl Into<String>, code: &str, message: impl Into<String>) {
        self.0.push(Issue {
            path: path.into(),
            code: code.into(),
            message: message.into(),
        });
    }
}

impl HttpPlan {
    fn parse(def: &ToolDefinition) -> Result<Self, Vec<Issue>> {
        let mut p = Problems(Vec::new());
        let Some(run) = &def.run else {
            p.add("run", "run.missing", "An http tool needs a [run] section");
            return Err(p.0);
        };
        let s = &run.settings;
        for key in s.keys() {
            if !SETTINGS.contains(&key.as_str()) {
                p.add(
                    format!("run.{key}"),
                    "run.unknown_setting",
                    format!("Unknown http setting {key:?}; use {}", SETTINGS.join(", ")),
                );
            }
        }
        let params = parameters(def);
        let check_params = |p: &mut Problems, at: &str, t: &Template| {
            for name in t.params() {
                if !params.contains_key(name) {
                    p.add(
                        at,
                        "run.unknown_parameter",
                        format!(
                            "{{{name}}} names no parameter of this tool; declare it or fix the name"
                        ),
                    );
                }
            }
        };

        let method = match s.get("method") {
            None => "GET".to_owned(),
            Some(Value::String(m)) if METHODS.contains(&m.to_ascii_uppercase().as_str()) => {
                m.to_ascii_uppercase()
            }
            Some(other) => {
                p.add(
                    "run.method",
                    "run.method",
                    format!(
                        "Method {other} is not supported; use one of {}",
                        METHODS.join(", ")
                    ),
                );
                "GET".to_owned()
            }
        };

        let url = match s.get("url") {
            Some(Value::String(raw)) => match Template::parse(raw) {
                Ok(t) => {
                    check_url(raw, &t, &params, &mut p);
                    check_params(&mut p, "run.url", &t);
                    t
                }
                Err(e) => {
                    p.add("run.url", "run.template", format!("Bad url template: {e}"));
                    Template(Vec::new())
                }
            },
            _ => {
                p.add(
                    "run.url",
                    "run.url_missing",
                    "An http tool needs run.url, an absolute https:// or http:// URL (template)",
                );
                Template(Vec::new())
            }
        };

        let headers = match s.get("headers") {
            None => Vec::new(),
            Some(Value::Object(h)) => {
                let mut out = Vec::new();
                for (name, value) in h {
                    let at = format!("run.headers.{name}");
                    if name.is_empty()
                        || !name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
                    {
                        p.add(
                            &at,
                            "run.header_name",
                            format!("{name:?} is not a valid header name"),
                        );
                        continue;
                    }
                    let Some(raw) = value.as_str() else {
                        p.add(&at, "run.header_value", "Header values are strings");
                        continue;
                    };
                    if raw.contains(['\r', '\n']) {
                        p.add(
                            &at,
                            "run.header_value",
                            "Header values cannot contain line breaks",
                        );
                        continue;
                    }
                    match Template::parse(raw) {
                        Ok(t) => {
                            check_params(&mut p, &at, &t);
                            out.push((name.clone(), t));
                        }
                        Err(e) => p.add(&at, "run.template", e),
                    }
                }
                out
            }
            Some(_) => {
                p.add(
                    "run.headers",
                    "run.headers",
                    "run.headers is a table of header name = value",
                );
                Vec::new()
            }
        };

        let query = match s.get("query") {
            None => Vec::new(),
            Some(Value::Array(names)) => {
                let mut out = Vec::new();
                for (i, n) in names.iter().enumerate() {
                    match n.as_str() {
                        Some(name) if params.contains_key(name) => out.push((
                            name.to_owned(),
                            Template(vec![Piece::Param(name.to_owned())]),
                        )),
                        _ => p.add(
                            format!("run.query[{i}]"),
                            "run.unknown_parameter",
                            format!("{n} names no parameter of this tool"),
                        ),
                    }
                }
                out
            }
            Some(Value::Object(pairs)) => {
                let mut out = Vec::new();
                for (key, value) in pairs {
                    let at = format!("run.query.{key}");
                    let raw = match value {
                        Value::String(s) => s.clone(),
                        Value::Number(_) | Value::Bool(_) => value.to_string(),
                        _ => {
                            p.add(&at, "run.query", "Query values are strings (templates)");
                            continue;
                        }
                    };
                    match Template::parse(&raw) {
                        Ok(t) => {
                            check_params(&mut p, &at, &t);
                            out.push((key.clone(), t));
                        }
                        Err(e) => p.add(&at, "run.template", e),
                    }
                }
                out
            }
            Some(_) => {
                p.add(
                    "run.query",
                    "run.query",
                    "run.query is a list of parameter names or a table of name = template",
                );
                Vec::new()
            }
        };

        let body = match s.get("body") {
            None => None,
            Some(_) if matches!(method.as_str(), "GET" | "HEAD") => {
                p.add(
                    "run.body",
                    "run.body_method",
                    format!(
                        "A {method} request carries no body; use run.query, or method = \"POST\""
                    ),
                );
                None
            }
            Some(Value::Array(names)) => {
                let mut out = Vec::new();
                for (i, n) in names.iter().enumerate() {
                    match n.as_str() {
                        Some(name) if params.contains_key(name) => out.push(name.to_owned()),
                        _ => p.add(
                            format!("run.body[{i}]"),
                            "run.unknown_parameter",
                            format!("{n} names no parameter of this tool"),
                        ),
                    }
                }
                Some(Body::Pick(out))
            }
            Some(template @ Value::Object(_)) => {
                check_body_template(template, "run.body", &params, &mut p);
                Some(Body::Template(template.clone()))
            }
            Some(_) => {
                p.add(
                    "run.body",
                    "run.body",
                    "run.body is a list of parameter names or a JSON template table",
                );
                None
            }
        };

        let expect = match s.get("expect_status") {
            None => None,
            Some(Value::Array(codes)) if !codes.is_empty() => {
                let mut out = Vec::new();
                for (i, c) in codes.iter().enumerate() {
                    match c.as_u64() {
                        Some(n @ 100..=599) => out.push(n as u16),
                        _ => p.add(
                            format!("run.expect_status[{i}]"),
                            "run.expect_status",
                            format!("{c} is not an HTTP status code (100-599)"),
                        ),
                    }
                }
                Some(out)
            }
            Some(_) => {
                p.add(
                    "run.expect_status",
                    "run.expect_status",
                    "run.expect_status is a non-empty list of status codes, like [200, 201]",
                );
                None
            }
        };

        let response = match s.get("response") {
            None => Mapping::Whole,
            Some(Value::String(ptr)) => {
                check_pointer(ptr, "run.response", &mut p);
                Mapping::Pointer(ptr.clone())
            }
            Some(Value::Object(fields)) if !fields.is_empty() => {
                let mut out = Vec::new();
                for (field, ptr) in fields {
                    let at = format!("run.response.{field}");
                    match ptr.as_str() {
                        Some(ptr) => {
                            check_pointer(ptr, &at, &mut p);
                            out.push((field.clone(), ptr.to_owned()));
                        }
                        None => p.add(
                            &at,
                            "run.response",
                            "Each output field maps to a JSON pointer string like \"/data/0/name\"",
                        ),
                    }
                }
                Mapping::Fields(out)
            }
            Some(_) => {
                p.add(
                    "run.response",
                    "run.response",
                    "run.response is a JSON pointer (\"/data\") or a table of output field = JSON pointer",
                );
                Mapping::Whole
            }
        };

        let pagination = s.get("pagination").and_then(|raw| {
            parse_pagination(raw, def, &params, &headers, &query, body.as_ref(), &mut p)
        });

        if p.0.is_empty() {
            Ok(Self {
                method,
                url,
                headers,
                query,
                body,
                expect,
                response,
                pagination,
            })
        } else {
            Err(p.0)
        }
    }
}

/// Checks `run.pagination` (problems go to `p`).
fn parse_pagination(
    raw: &Value,
    def: &ToolDefinition,
    params: &BTreeMap<String, bool>,
    headers: &[(String, Template)],
    query: &[(String, Template)],
    body: Option<&Body>,
    p: &mut Problems,
) -> Option<Pagination> {
    let Value::Object(table) = raw else {
        p.add(
            "run.pagination",
            "run.pagination",
            "run.pagination is a table: next_cursor = \"/json/pointer/to/the/next/cursor\" and optionally cursor_param = \"cursor\"",
        );
        return None;
    };
    for key in table.keys() {
        if !matches!(key.as_str(), "next_cursor" | "cursor_param") {
            p.add(
                format!("run.pagination.{key}"),
                "run.unknown_setting",
                format!("Unknown pagination setting {key:?}; use next_cursor, cursor_param"),
            );
        }
    }
    let next_cursor = match table.get("next_cursor") {
        Some(Value::String(ptr)) if ptr.starts_with('/') => ptr.clone(),
        _ => {
            p.add(
                "run.pagination.next_cursor",
                "run.pagination",
                "run.pagination.next_cursor is the JSON pointer to the next page's cursor in the response, like \"/meta/next_cursor\"",
            );
            return None;
        }
    };
    let param = match table.get("cursor_param") {
        None => DEFAULT_CURSOR_PARAM.to_owned(),
        Some(Value::String(name)) => name.clone(),
        Some(_) => {
            p.add(
                "run.pagination.cursor_param",
                "run.pagination",
                "run.pagination.cursor_param is the name of the parameter that sends the cursor",
            );
            return None;
        }
    };
    let at = "run.pagination.cursor_param";
    match params.get(&param) {
        None => {
            p.add(
                at,
                "run.unknown_parameter",
                format!("Pagination needs a parameter {param:?} (an optional string) to carry the cursor; declare it"),
            );
            return None;
        }
        Some(true) => p.add(
            at,
            "run.pagination",
            format!("Parameter {param:?} carries the cursor, so it must be optional without a default (the first page has none)"),
        ),
        Some(false) => {}
    }
    let mut used = headers
        .iter()
        .chain(query)
        .any(|(_, t)| t.params().any(|n| n == param));
    match body {
        Some(Body::Pick(names)) => used |= names.contains(&param),
        Some(Body::Template(t)) => used |= template_uses(t, &param),
        None => {}
    }
    if !used {
        p.add(
            at,
            "run.pagination",
            format!("Parameter {param:?} carries the cursor but is not sent: use it in run.query, run.headers or run.body, like query = {{ cursor = \"{{{param}}}\" }}"),
        );
    }
    if let Some(Value::Object(schema)) = &def.output_schema
        && schema.get("additionalProperties") == Some(&Value::Bool(false))
        && !schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|props| props.contains_key("nextCursor"))
    {
        p.add(
            "run.pagination",
            "run.pagination",
            "The output schema refuses unknown properties, so declare nextCursor (a string) in it: paged results carry it",
        );
    }
    Some(Pagination { next_cursor, param })
}

/// Whether a body template uses `{param}` anywhere.
fn template_uses(t: &Value, param: &str) -> bool {
    match t {
        Value::String(s) => Template::parse(s).is_ok_and(|t| t.params().any(|n| n == param)),
        Value::Array(items) => items.iter().any(|v| template_uses(v, param)),
        Value::Object(map) => map.values().any(|v| template_uses(v, param)),
        _ => false,
    }
}

fn check_url(raw: &str, t: &Template, params: &BTreeMap<String, bool>, p: &mut Problems) {
    if t.has_env() {
        p.add(
            "run.url",
            "run.url_secret",
            "${env:...} is not allowed in run.url (URLs appear in messages); pass secrets in run.headers or run.query",
        );
    }
    let lower = raw.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        p.add(
            "run.url",
            "run.url_scheme",
            format!("{raw:?} is not an absolute http:// or https:// URL"),
        );
        return;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        p.add("run.url", "run.url_host", format!("{raw:?} has no host"));
    }
    if authority.contains(['{', '}', '@']) {
        p.add(
            "run.url",
            "run.url_host",
            "The scheme, host and port of run.url must be literal (no placeholders, no user info): a call cannot choose where the request goes",
        );
    }
    for name in t.params() {
        if params.get(name) == Some(&false) {
            p.add(
                "run.url",
                "run.url_optional_parameter",
                format!("{{{name}}} in run.url names an optional parameter without a default; make it required, give it a default, or pass it in run.query"),
            );
        }
    }
}

fn check_body_template(v: &Value, at: &str, params: &BTreeMap<String, bool>, p: &mut Problems) {
    match v {
        Value::String(s) => match Template::parse(s) {
            Ok(t) => {
                for name in t.params() {
                    if !params.contains_key(name) {
                        p.add(
                            at,
                            "run.unknown_parameter",
                            format!("{{{name}}} names no parameter of this tool"),
                        );
                    }
                }
            }
            Err(e) => p.add(at, "run.template", e),
        },
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_body_template(item, &format!("{at}[{i}]"), params, p);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                check_body_template(item, &format!("{at}.{k}"), params, p);
            }
        }
        _ => {}
    }
}

fn check_pointer(ptr: &str, at: &str, p: &mut Problems) {
    if !ptr.is_empty() && !ptr.starts_with('/') {
        p.add(
            at,
            "run.pointer",
            format!("{ptr:?} is not a JSON pointer; write it like \"/data/items\" (\"\" is the whole body)"),
        );
    }
}

/// A tool built from an http run section.
struct HttpTool {
    definition: ToolDefinition,
    plan: Arc<HttpPlan>,
    secrets: Secrets,
}

impl Tool for HttpTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let mut args = match args {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            let plan = &self.plan;
            if let Some(paging) = &plan.pagination {
                unwrap_cursor(&mut args, &paging.param, &self.definition.name)?;
            }
            let scope = RenderScope {
                tool: self.definition.name.as_str(),
                secrets: &self.secrets,
            };
            let request = plan.request(&args, &scope)?;
            let shown = request
                .url
                .split(['?', '#'])
                .next()
                .unwrap_or("")
                .to_owned();
            ctx.check_cancelled()?;
            let response = ctx.http()?.send(request, ctx.cancellation()).await?;
            let ok = match &plan.expect {
                Some(codes) => codes.contains(&response.status),
                None => (200..300).contains(&response.status),
            };
            if !ok {
                return Err(status_error(
                    &plan.method,
                    &shown,
                    response.status,
                    &response.body,
                ));
            }
            let body: Value = match serde_json::from_slice(&response.body) {
                Ok(v) => v,
                Err(_) if response.body.is_empty() => Value::Null,
                Err(_) => {
                    let text = String::from_utf8_lossy(&response.body).into_owned();
                    return match plan.response {
                        Mapping::Whole => Ok(serde_json::json!({ "text": text })),
                        _ => Err(ToolError::execution(format!(
                            "{} {shown} answered with a body that is not JSON, so run.response cannot map it: {}",
                            plan.method,
                            excerpt(&response.body)
                        ))
                        .permanent()),
                    };
                }
            };
            let next = plan
                .pagination
                .as_ref()
                .map(|paging| body.pointer(&paging.next_cursor).cloned());
            let out = match &plan.response {
                Mapping::Whole => body,
                Mapping::Pointer(ptr) => body.pointer(ptr).cloned().ok_or_else(|| {
                    ToolError::execution(format!(
                        "The response of {} {shown} has nothing at {ptr} (run.response); the API's answer may have changed: {}",
                        plan.method,
                        excerpt(&response.body)
                    ))
                    .permanent()
                })?,
                Mapping::Fields(fields) => {
                    let mut out = Map::new();
                    for (field, ptr) in fields {
                        out.insert(field.clone(), body.pointer(ptr).cloned().unwrap_or(Value::Null));
                    }
                    Value::Object(out)
                }
            };
            match next {
                None => Ok(out),
                Some(next) => Ok(with_next_cursor(out, next, &self.definition.name)),
            }
        })
    }
}

/// Replaces the opaque cursor argument `param` by the API's own cursor it wraps.
fn unwrap_cursor(args: &mut Map<String, Value>, param: &str, tool: &str) -> Result<(), ToolError> {
    let token = match args.get(param) {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::String(token)) => token,
        Some(_) => {
            return Err(ToolError::validation(format!(
                "Argument {param} must be a string: pass the nextCursor of the previous {tool} result unchanged, or leave {param} out to start from the beginning"
            )));
        }
    };
    let decoded = cursor::decode(tool, token).map_err(|e| {
        // The messages name the argument `cursor`; this tool may call it otherwise.
        let message = e
            .message()
            .replacen("cursor ", &format!("{param} "), 1)
            .replace("leave cursor out", &format!("leave {param} out"));
        ToolError::validation(message)
    })?;
    args.insert(param.to_owned(), decoded.position);
    Ok(())
}

/// The mapped result with `nextCursor` (wrapping the API's cursor) when the API gave one; a
/// result that is not an object becomes `{"items": result}` first.
fn with_next_cursor(out: Value, next: Option<Value>, tool: &str) -> Value {
    let mut out = match out {
        Value::Object(m) => m,
        other => {
            let mut m = Map::new();
            m.insert("items".into(), other);
            m
        }
    };
    let more = match &next {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    };
    if let (true, Some(next)) = (more, next) {
        let token = cursor::encode(tool, Map::new(), next);
        out.insert("nextCursor".into(), Value::String(token));
    } else {
        out.remove("nextCursor");
    }
    Value::Object(out)
}

impl HttpPlan {
    fn request(
        &self,
        args: &Map<String, Value>,
        scope: &RenderScope<'_>,
    ) -> Result<HttpRequest, ToolError> {
        let mut url = self.url.render(args, true, scope)?.ok_or_else(|| {
            ToolError::validation(format!(
                "Tool {} cannot build its URL: a parameter it needs is missing",
                scope.tool
            ))
        })?;
        let mut pairs = String::new();
        for (key, value) in &self.query {
            if let Some(v) = value.render(args, false, scope)? {
                if !pairs.is_empty() {
                    pairs.push('&');
                }
                let _ = write!(
                    pairs,
                    "{}={}",
                    utf8_percent_encode(key, COMPONENT),
                    utf8_percent_encode(&v, COMPONENT)
                );
            }
        }
        if !pairs.is_empty() {
            let (base, fragment) = match url.split_once('#') {
                Some((b, f)) => (b.to_owned(), Some(f.to_owned())),
                None => (url.clone(), None),
            };
            let joiner = if base.contains('?') { '&' } else { '?' };
            url = format!("{base}{joiner}{pairs}");
            if let Some(f) = fragment {
                url.push('#');
                url.push_str(&f);
            }
        }
        let mut headers = Vec::with_capacity(self.headers.len() + 2);
        for (name, value) in &self.headers {
            if let Some(v) = value.render(args, false, scope)? {
                if v.contains(['\r', '\n']) {
                    return Err(ToolError::validation(format!(
                        "The value for header {name} contains a line break"
                    )));
                }
                headers.push((name.clone(), v));
            }
        }
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("accept"))
        {
            headers.push(("Accept".into(), "application/json".into()));
        }
        let body = match &self.body {
            None => None,
            Some(body) => {
                let json = match body {
                    Body::Pick(names) => Value::Object(
                        names
                            .iter()
                            .filter_map(|n| args.get(n).map(|v| (n.clone(), v.clone())))
                            .collect(),
                    ),
                    Body::Template(t) => fill(t, args, scope)?.unwrap_or(Value::Null),
                };
                if !headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("Content-Type".into(), "application/json".into()));
                }
                Some(serde_json::to_vec(&json).map_err(|e| {
                    ToolError::execution(format!("Cannot encode the request body: {e}"))
                })?)
            }
        };
        Ok(HttpRequest {
            method: self.method.clone(),
            url,
            headers,
            body,
            ..HttpRequest::default()
        })
    }
}

/// Fills a body template; `None` when the value depends on an absent parameter (left out).
fn fill(
    t: &Value,
    args: &Map<String, Value>,
    scope: &RenderScope<'_>,
) -> Result<Option<Value>, ToolError> {
    Ok(match t {
        Value::String(s) => {
            let template = Template::parse(s).map_err(ToolError::execution)?;
            if let [Piece::Param(name)] = template.0.as_slice() {
                args.get(name).cloned()
            } else {
                template.render(args, false, scope)?.map(Value::String)
            }
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                if let Some(v) = fill(item, args, scope)? {
                    out.push(v);
                }
            }
            Some(Value::Array(out))
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, item) in map {
                if let Some(v) = fill(item, args, scope)? {
                    out.insert(k.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        other => Some(other.clone()),
    })
}

fn status_error(method: &str, url: &str, status: u16, body: &[u8]) -> ToolError {
    let message = format!(
        "{method} {url} answered HTTP {status}{}: {}",
        match status {
            401 | 403 => " (check the credentials the tool sends)",
            404 => " (not found: check the arguments)",
            429 => " (too many requests: wait before trying again)",
            _ => "",
        },
        excerpt(body)
    );
    match status {
        401 | 403 => ToolError::authorization(message).permanent(),
        429 => ToolError::new(ErrorKind::RateLimited, message),
        500..=599 => ToolError::unavailable(message),
        _ => ToolError::execution(message).permanent(),
    }
}

/// The start of a body, on one line, for messages.
fn excerpt(body: &[u8]) -> String {
    const MAX: usize = 300;
    let text = String::from_utf8_lossy(body);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return "(empty body)".into();
    }
    match one_line.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_placeholders_secrets_and_escapes() {
        let t = Template::parse("a/{city}?k=${env:KEY}&x={{y}}").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.0,
            vec![
                Piece::Text("a/".into()),
                Piece::Param("city".into()),
                Piece::Text("?k=".into()),
                Piece::Env("KEY".into()),
                Piece::Text("&x={y}".into()),
            ]
        );
        assert!(Template::parse("{Bad Name}").is_err());
        assert!(Template::parse("{open").is_err());
        assert!(Template::parse("close}").is_err());
        assert!(Template::parse("${env:}").is_err());
    }

    #[test]
    fn values_are_percent_encoded_in_urls() {
        let t = Template::parse("https://h/x/{q}").unwrap_or_else(|e| panic!("{e}"));
        let mut args = Map::new();
        args.insert("q".into(), Value::String("../a b&c=d/é".into()));
        let secrets: Secrets = Arc::new(|_| None);
        let scope = RenderScope {
            tool: "t",
            secrets: &secrets,
        };
        let out = t
            .render(&args, true, &scope)
            .ok()
            .flatten()
            .unwrap_or_default();
        assert_eq!(out, "https://h/x/..%2Fa%20b%26c%3Dd%2F%C3%A9");
    }
}
