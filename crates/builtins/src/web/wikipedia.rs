//! `wikipedia` (`docs/tool-model.md#built-in-tools`): `{query, lang}` → `{summary, url, title,
//! kind, alternatives}`.
//!
//! Two requests to `https://{lang}.wikipedia.org` (or [`WikipediaConfig::base_url`]):
//!
//! 1. MediaWiki search: `GET /w/api.php?action=query&list=search&srsearch=…&format=json&srlimit=5&formatversion=2`;
//! 2. the REST summary of the best hit: `GET /api/rest_v1/page/summary/{Title_with_underscores}`
//!    (percent-encoded, `/` included).
//!
//! Outcomes: an article → its lead extract (`kind` is Wikipedia's `type`, e.g. `standard`); a
//! disambiguation page → a summary that says the query is ambiguous and lists the other hits'
//! titles to call again with (`kind: "disambiguation"`, `alternatives`); no hit at all → an
//! `execution` error `No Wikipedia article matches "…"; try other words` (with Wikipedia's
//! spelling suggestion when it has one); a 404 summary → an `execution` error naming the title.
//!
//! Permission: `tool.network.search` — like `web_search`, it sends the caller's words to a public
//! search service; a principal allowed to search the web may ask Wikipedia too.

use std::fmt;
use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    BoxFuture, Category, Consequence, Constraints, Effect, ErrorKind, HttpRequest, HttpResponse,
    ParamType, Parameter, Tool, ToolBuilder, ToolContext, ToolDefinition, ToolError, ToolOutput,
};
use url::Url;

use super::text::{collapse_whitespace, strip_tags};
use super::{
    DEFAULT_MAX_RESPONSE_BYTES, Limits, clause, error_detail, in_context, non_blank, override_from,
    parse_json, retry_hint, send, status_text,
};
use crate::args::{string_arg, string_or};

/// The tool's name.
pub const WIKIPEDIA: &str = "wikipedia";

/// The description a model routes by.
pub const WIKIPEDIA_DESCRIPTION: &str = "Looks a subject up on Wikipedia and returns {summary, \
url, title, kind, alternatives}: the lead section of the best-matching article as plain text, \
its address and exact title. Use it for encyclopedic background on people, places, concepts, \
events and organisations; use web_search for news or anything that changes quickly. query is a \
subject or a few keywords, not a question. lang is the Wikipedia language edition (\"en\" by \
default, \"de\", \"fr\", \"pt-br\"...). When the subject is ambiguous, kind is \
\"disambiguation\" and alternatives lists article titles: call again with the one you mean. \
When nothing matches, the call fails with a message; try other words.";

/// Environment variable that overrides [`WikipediaConfig::base_url`] (when set and not blank).
pub const ENV_WIKIPEDIA_BASE_URL: &str = "TOOLGATE_WIKIPEDIA_BASE_URL";

/// Search hits asked for: the best is summarized, the others are the alternatives.
const SEARCH_LIMIT: usize = 5;

/// Default time limit of each of the two requests (the tool's own timeout is 25 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const TOOL_TIMEOUT_MS: u64 = 25_000;

/// Characters left as they are in a title's path segment: RFC 3986 unreserved.
const TITLE_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Where `wikipedia` sends its requests. `Debug` shows everything (there are no secrets).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WikipediaConfig {
    /// Replaces `https://{lang}.wikipedia.org` (scheme, host, port and an optional path
    /// prefix); a `{lang}` in it is replaced by the call's language. Without `{lang}` every
    /// language goes to the same wiki (a mirror or a single MediaWiki).
    pub base_url: Option<String>,
}

impl WikipediaConfig {
    /// This configuration with `TOOLGATE_WIKIPEDIA_BASE_URL` from the process environment
    /// taking precedence where it is set and not blank.
    #[must_use]
    pub fn with_env(self) -> Self {
        self.with_vars(|name| std::env::var(name).ok())
    }

    /// [`Self::with_env`] with the variables read through `var`.
    #[must_use]
    pub fn with_vars(mut self, var: impl Fn(&str) -> Option<String>) -> Self {
        override_from(&mut self.base_url, ENV_WIKIPEDIA_BASE_URL, &var);
        self
    }

    /// The wiki's base URL for `lang`.
    fn base(&self, lang: &str) -> Result<Url, ToolError> {
        let raw = match non_blank(self.base_url.clone()) {
            Some(base) => base.replace("{lang}", lang),
            None => format!("https://{lang}.wikipedia.org"),
        };
        Url::parse(&raw)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| {
                ToolError::unavailable(format!(
                    "wikipedia base URL {raw:?} is not an http:// or https:// address; fix {ENV_WIKIPEDIA_BASE_URL} or [wikipedia] base_url in the config file"
                ))
                .permanent()
            })
    }
}

/// `wikipedia`: `{query, lang}` → `{summary, url, title, kind, alternatives}`.
#[derive(Clone)]
pub struct Wikipedia {
    config: WikipediaConfig,
    limits: Limits,
    definition: ToolDefinition,
}

impl fmt::Debug for Wikipedia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wikipedia")
            .field("config", &self.config)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Default for Wikipedia {
    fn default() -> Self {
        Self::new(WikipediaConfig::default())
    }
}

impl Wikipedia {
    /// The tool using `config` (usually `WikipediaConfig::default().with_env()`).
    pub fn new(config: WikipediaConfig) -> Self {
        let definition = ToolBuilder::new(WIKIPEDIA, WIKIPEDIA_DESCRIPTION)
            .title("Wikipedia")
            .category(Category::Knowledge)
            .effect(Effect::Read)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .idempotent(true)
            .param(
                Parameter::new("query", ParamType::String)
                    .description("The subject to look up, e.g. \"Ada Lovelace\" or \"plate tectonics\"")
                    .schema(json!({"minLength": 1, "pattern": "\\S"}))
                    .required(),
            )
            .param(
                Parameter::new("lang", ParamType::String)
                    .description("Wikipedia language edition code, e.g. \"en\", \"de\", \"pt-br\"")
                    .schema(json!({"pattern": "^[a-z]{2,3}(-[a-z]+)?$"}))
                    .default_value(json!("en")),
            )
            .permission("tool.network.search")
            .constraints(Constraints {
                timeout_ms: Some(TOOL_TIMEOUT_MS),
                ..Constraints::default()
            })
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "The article's lead section as plain text, or what to do when the subject is ambiguous"},
                    "url": {"type": "string", "description": "The article's address"},
                    "title": {"type": "string", "description": "The article's exact title"},
                    "kind": {"type": "string", "description": "Wikipedia's page type: standard, disambiguation, no-extract or mainpage"},
                    "alternatives": {"type": "array", "items": {"type": "string"}, "description": "Titles of other matching articles"}
                },
                "required": ["summary", "url", "title", "kind", "alternatives"],
                "additionalProperties": false
            }))
            .tag("web")
            .tag("knowledge")
            .definition()
            .clone();
        Self {
            config,
            limits: Limits {
                timeout: REQUEST_TIMEOUT,
                max_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            },
            definition,
        }
    }

    /// Time limit of each request (default 10 s; the tool's own timeout is 25 s).
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.limits.timeout = timeout;
        self
    }

    /// Largest response accepted (default 2 MiB).
    #[must_use]
    pub fn with_max_response_bytes(mut self, bytes: u64) -> Self {
        self.limits.max_bytes = bytes;
        self
    }

    async fn look_up(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let query = string_arg(args, "query")?.trim();
        if query.is_empty() {
            return Err(ToolError::validation(
                "query is empty; give the subject to look up",
            ));
        }
        let lang = string_or(args, "lang", "en")?;
        if !valid_lang(lang) {
            return Err(ToolError::validation(format!(
                "lang {lang:?} is not a Wikipedia language code; use a code like \"en\", \"de\" or \"pt-br\""
            )));
        }
        let base = self.config.base(lang)?;

        let titles = self.search(&base, query, ctx).await?;
        let (best, others) = titles
            .split_first()
            .ok_or_else(|| ToolError::execution("Wikipedia search returned no titles"))?;
        let summary = self.summary(&base, best, ctx).await?;
        Ok(render(&base, best, others, &summary))
    }

    /// Titles of the best hits, best first; an error when there is none.
    async fn search(
        &self,
        base: &Url,
        query: &str,
        ctx: &ToolContext,
    ) -> Result<Vec<String>, ToolError> {
        let mut url = endpoint(base, "/w/api.php");
        url.query_pairs_mut()
            .append_pair("action", "query")
            .append_pair("list", "search")
            .append_pair("srsearch", query)
            .append_pair("format", "json")
            .append_pair("srlimit", &SEARCH_LIMIT.to_string())
            .append_pair("formatversion", "2");
        let request = HttpRequest::get(url.as_str()).header("Accept", "application/json");
        let response = send(ctx, request, self.limits)
            .await
            .map_err(|e| in_context(e, "Searching Wikipedia failed", &[]))?;
        if !(200..300).contains(&response.status) {
            return Err(status_error("Wikipedia search", &response));
        }
        let body = parse_json(
            &response.body,
            "Wikipedia search",
            "; the wiki may be having problems, try again later",
        )?;
        if let Some(error) = body.get("error") {
            let info = error
                .get("info")
                .and_then(Value::as_str)
                .unwrap_or("no details given");
            let code = error.get("code").and_then(Value::as_str).unwrap_or("error");
            return Err(
                ToolError::execution(format!("Wikipedia search failed: {info} ({code})"))
                    .permanent(),
            );
        }
        let hits = body
            .pointer("/query/search")
            .and_then(Value::as_array)
            .map(|hits| {
                hits.iter()
                    .filter_map(|h| h.get("title").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        if hits.is_empty() {
            let suggestion = body
                .pointer("/query/searchinfo/suggestion")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(|s| format!(" (Wikipedia suggests {s:?})"))
                .unwrap_or_default();
            return Err(ToolError::execution(format!(
                "No Wikipedia article matches {query:?}{suggestion}; try other words"
            ))
            .permanent());
        }
        Ok(hits)
    }

    /// The REST summary of `title`.
    async fn summary(
        &self,
        base: &Url,
        title: &str,
        ctx: &ToolContext,
    ) -> Result<Value, ToolError> {
        let mut url = endpoint(base, "");
        let path = format!(
            "{}/api/rest_v1/page/summary/{}",
            url.path().trim_end_matches('/'),
            title_segment(title)
        );
        // The segment is already percent-encoded; set_path keeps existing escapes.
        url.set_path(&path);
        let request = HttpRequest::get(url.as_str()).header("Accept", "application/json");
        let response = send(ctx, request, self.limits).await.map_err(|e| {
            in_context(
                e,
                &format!("Fetching the Wikipedia summary of {title:?} failed"),
                &[],
            )
        })?;
        if response.status == 404 {
            let detail = error_detail(&response.body).unwrap_or_else(|| "no details given".into());
            return Err(ToolError::execution(format!(
                "Wikipedia has no page titled {title:?} (HTTP 404: {}); try other words",
                clause(&detail)
            ))
            .permanent());
        }
        if !(200..300).contains(&response.status) {
            return Err(status_error("Wikipedia", &response));
        }
        let body = parse_json(
            &response.body,
            "Wikipedia",
            "; the wiki may be having problems, try again later",
        )?;
        if !body.is_object() {
            return Err(ToolError::execution(
                "Wikipedia returned JSON that is not a page summary (not an object)",
            )
            .permanent());
        }
        Ok(body)
    }
}

impl Tool for Wikipedia {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move { self.look_up(&args, &ctx).await })
    }
}

/// `^[a-z]{2,3}(-[a-z]+)?$` without a regex engine.
fn valid_lang(lang: &str) -> bool {
    let (head, tail) = match lang.split_once('-') {
        Some((h, t)) => (h, Some(t)),
        None => (lang, None),
    };
    let lower = |s: &str| s.bytes().all(|b| b.is_ascii_lowercase());
    (2..=3).contains(&head.len()) && lower(head) && tail.is_none_or(|t| !t.is_empty() && lower(t))
}

/// `base` with `path` appended to its own path and no query.
fn endpoint(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    let joined = format!("{}{path}", url.path().trim_end_matches('/'));
    url.set_path(&joined);
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// A title as the REST API's path segment: spaces as underscores, the rest percent-encoded.
fn title_segment(title: &str) -> String {
    utf8_percent_encode(&title.replace(' ', "_"), TITLE_SEGMENT).to_string()
}

/// The tool's output for a summary.
fn render(base: &Url, searched: &str, others: &[String], summary: &Value) -> Value {
    let text = |pointer: &str| {
        summary
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let title = text("/title").map_or_else(|| searched.to_owned(), strip_tags);
    let kind = text("/type").unwrap_or("standard").to_owned();
    let url = text("/content_urls/desktop/page").map_or_else(
        || endpoint(base, &format!("/wiki/{}", title_segment(&title))).to_string(),
        str::to_owned,
    );
    let alternatives: Vec<String> = others
        .iter()
        .filter(|t| **t != title && t.as_str() != searched)
        .cloned()
        .collect();
    let extract = text("/extract").map(collapse_whitespace);
    let summary_text = if kind == "disambiguation" {
        let mut s =
            format!("{title:?} is ambiguous: Wikipedia lists several subjects under this name.");
        // The extract of a disambiguation page is usually a lead-in to the list ("Mercury
        // commonly refers to:"), which the summary does not carry; keep it only if it stands
        // on its own.
        if let Some(extract) = extract.as_ref().filter(|e| !e.ends_with(':')) {
            s.push(' ');
            s.push_str(extract);
        }
        if alternatives.is_empty() {
            s.push_str(" Call wikipedia again with a more specific query.");
        } else {
            s.push_str(&format!(
                " Matching articles: {}. Call wikipedia again with the title you mean.",
                alternatives.join("; ")
            ));
        }
        s
    } else {
        match (extract, text("/description")) {
            (Some(extract), _) => extract,
            (None, Some(description)) => collapse_whitespace(description),
            (None, None) => {
                format!("Wikipedia has no summary text for {title:?}; read it at {url}")
            }
        }
    };
    json!({
        "summary": summary_text,
        "url": url,
        "title": title,
        "kind": kind,
        "alternatives": alternatives,
    })
}

/// The error an HTTP error status of `service` means.
fn status_error(service: &str, response: &HttpResponse) -> ToolError {
    let status = response.status;
    let http = status_text(status);
    let detail = error_detail(&response.body).unwrap_or_else(|| "no details given".into());
    let detail = clause(&detail);
    match status {
        429 => ToolError::new(
            ErrorKind::RateLimited,
            format!(
                "{service} is rate limiting requests ({http}): {detail}; {}",
                retry_hint(response)
            ),
        ),
        401 | 403 => ToolError::authorization(format!(
            "{service} refused the request ({http}): {detail}; if {ENV_WIKIPEDIA_BASE_URL} points at a private wiki, it must allow anonymous reads"
        ))
        .permanent(),
        s if s >= 500 => ToolError::unavailable(format!(
            "{service} failed ({http}): {detail}; try again later"
        )),
        _ => ToolError::execution(format!("{service} refused the request ({http}): {detail}"))
            .permanent(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_codes() {
        for ok in ["en", "de", "als", "pt-br", "zh-yue", "be-tarask"] {
            assert!(valid_lang(ok), "{ok}");
        }
        for bad in [
            "", "e", "engl", "EN", "en-", "en-US", "en_gb", "-en", "en-b-c", "../x",
        ] {
            assert!(!valid_lang(bad), "{bad}");
        }
    }

    #[test]
    fn default_base_is_the_language_edition() {
        let config = WikipediaConfig::default();
        assert_eq!(
            config.base("de").unwrap().as_str(),
            "https://de.wikipedia.org/"
        );
        let config = WikipediaConfig {
            base_url: Some("http://127.0.0.1:9/{lang}/".into()),
        };
        assert_eq!(
            config.base("fr").unwrap().as_str(),
            "http://127.0.0.1:9/fr/"
        );
        let config = WikipediaConfig::default()
            .with_vars(|n| (n == ENV_WIKIPEDIA_BASE_URL).then(|| "http://wiki.test".to_owned()));
        assert_eq!(config.base("en").unwrap().as_str(), "http://wiki.test/");
        let bad = WikipediaConfig {
            base_url: Some("wiki.test".into()),
        };
        assert_eq!(bad.base("en").unwrap_err().kind(), ErrorKind::Unavailable);
    }

    #[test]
    fn titles_become_encoded_segments() {
        assert_eq!(title_segment("Mercury (planet)"), "Mercury_%28planet%29");
        assert_eq!(title_segment("AC/DC"), "AC%2FDC");
        assert_eq!(title_segment("Zürich"), "Z%C3%BCrich");
    }

    #[test]
    fn summary_without_extract_falls_back_to_description_then_a_pointer() {
        let base = Url::parse("https://en.wikipedia.org").unwrap();
        let out = render(
            &base,
            "X",
            &[],
            &json!({"type": "no-extract", "title": "X", "description": "A thing"}),
        );
        assert_eq!(out["summary"], "A thing");
        assert_eq!(out["url"], "https://en.wikipedia.org/wiki/X");
        let out = render(
            &base,
            "X",
            &[],
            &json!({"type": "no-extract", "title": "X"}),
        );
        assert_eq!(
            out["summary"],
            "Wikipedia has no summary text for \"X\"; read it at https://en.wikipedia.org/wiki/X"
        );
    }
}
