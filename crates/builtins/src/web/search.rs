//! `web_search` (`docs/tool-model.md#built-in-tools`): `{query, num_results}` → `{results: [{title,
//! snippet, url}]}` from one configured engine — SerpAPI, Google Custom Search, Bing Web Search v7,
//! Brave Search or a SearXNG instance.
//!
//! The engine, key, Google's engine id (`cx`) and a base URL come from [`SearchConfig`] (the
//! `[search]` table of the CLI's config file), overridden by `TOOLGATE_SEARCH_*` environment
//! variables. Requests and responses follow each API's documentation:
//!
//! | engine | request (`base_url` replaces the scheme, host and port) | results |
//! |---|---|---|
//! | serpapi | `https://serpapi.com/search.json?engine=google&q=…&num=…&api_key=…` | `organic_results[].{title, link, snippet}` |
//! | google | `https://www.googleapis.com/customsearch/v1?key=…&cx=…&q=…&num=…` (num ≤ 10) | `items[].{title, link, snippet}` |
//! | bing | `https://api.bing.microsoft.com/v7.0/search?q=…&count=…&responseFilter=Webpages`, header `Ocp-Apim-Subscription-Key` | `webPages.value[].{name, url, snippet}` |
//! | brave | `https://api.search.brave.com/res/v1/web/search?q=…&count=…` (count ≤ 20), header `X-Subscription-Token` | `web.results[].{title, url, description}` |
//! | searxng | `{base_url}/search?q=…&format=json` (no official host; the instance must enable the JSON format) | `results[].{title, url, content}` |
//!
//! Markup in titles and snippets (Brave's `<strong>` highlights, SearXNG's) is removed and
//! whitespace collapsed in every engine's results. Results without a URL are skipped.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    BoxFuture, Category, Consequence, Constraints, Effect, HttpRequest, HttpResponse, ParamType,
    Parameter, Tool, ToolBuilder, ToolContext, ToolDefinition, ToolError, ToolOutput,
};
use url::Url;

use super::text::{collapse_whitespace, strip_tags};
use super::{
    DEFAULT_MAX_RESPONSE_BYTES, Limits, REDACTED, clause, error_detail, in_context, non_blank,
    override_from, parse_json, retry_hint, scrubbed, send, status_text,
};
use crate::args::string_arg;

/// The tool's name.
pub const WEB_SEARCH: &str = "web_search";

/// The description a model routes by.
pub const WEB_SEARCH_DESCRIPTION: &str = "Searches the web and returns {results: [{title, \
snippet, url}]}, best match first. Use it for current events, facts that may have changed since \
your training, or to find pages to read; follow up with web_scraper on a result's url to read \
the page itself, or use wikipedia for encyclopedic background. Write the query as you would in a \
search box (keywords, quoted phrases). num_results is how many results to return, 1 to 20 \
(default 5); engines may return fewer. Snippets are short plain-text extracts chosen by the \
engine, not the whole page. Fails with a message when no search engine or API key is configured, \
when the engine rejects the key or rate-limits (try again later) or is down.";

/// Most results one call returns.
pub const MAX_SEARCH_RESULTS: u64 = 20;

/// Overrides [`SearchConfig`]'s engine. This and the other `ENV_SEARCH_*` variables win over
/// the configuration when set and not blank.
pub const ENV_SEARCH_ENGINE: &str = "TOOLGATE_SEARCH_ENGINE";
/// Overrides [`SearchConfig`]'s API key.
pub const ENV_SEARCH_API_KEY: &str = "TOOLGATE_SEARCH_API_KEY";
/// Overrides [`SearchConfig`]'s Google search engine id.
pub const ENV_SEARCH_CX: &str = "TOOLGATE_SEARCH_CX";
/// Overrides [`SearchConfig`]'s base URL.
pub const ENV_SEARCH_BASE_URL: &str = "TOOLGATE_SEARCH_BASE_URL";

/// Default time limit of one engine request (the tool's own timeout is 20 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const TOOL_TIMEOUT_MS: u64 = 20_000;

const ENGINE_SETTING: &str = "set TOOLGATE_SEARCH_ENGINE (serpapi, google, bing, brave or searxng) or [search] engine in the config file";
const KEY_SETTING: &str = "TOOLGATE_SEARCH_API_KEY or [search] api_key in the config file";
const BASE_SETTING: &str = "TOOLGATE_SEARCH_BASE_URL or [search] base_url in the config file";
const KEY_SHORT: &str = "TOOLGATE_SEARCH_API_KEY or [search] api_key";
const BASE_SHORT: &str = "TOOLGATE_SEARCH_BASE_URL or [search] base_url";

/// A supported search API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchEngine {
    /// SerpAPI's Google Search API (`serpapi`).
    SerpApi,
    /// Google's Custom Search JSON API (`google`); needs `cx`.
    Google,
    /// Bing Web Search API v7 (`bing`).
    Bing,
    /// Brave Search API (`brave`).
    Brave,
    /// A SearXNG instance's JSON API (`searxng`); needs `base_url`, no key.
    Searxng,
}

impl SearchEngine {
    /// Every engine, in the order messages list them.
    pub const ALL: [SearchEngine; 5] = [
        Self::SerpApi,
        Self::Google,
        Self::Bing,
        Self::Brave,
        Self::Searxng,
    ];

    /// The configuration name: `serpapi`, `google`, `bing`, `brave` or `searxng`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SerpApi => "serpapi",
            Self::Google => "google",
            Self::Bing => "bing",
            Self::Brave => "brave",
            Self::Searxng => "searxng",
        }
    }

    /// The name people know the service by, used in messages.
    pub fn label(self) -> &'static str {
        match self {
            Self::SerpApi => "SerpAPI",
            Self::Google => "Google Custom Search",
            Self::Bing => "Bing",
            Self::Brave => "Brave Search",
            Self::Searxng => "SearXNG",
        }
    }

    /// The official endpoint's scheme and host; `None` for SearXNG, which has none.
    pub fn official_base_url(self) -> Option<&'static str> {
        match self {
            Self::SerpApi => Some("https://serpapi.com"),
            Self::Google => Some("https://www.googleapis.com"),
            Self::Bing => Some("https://api.bing.microsoft.com"),
            Self::Brave => Some("https://api.search.brave.com"),
            Self::Searxng => None,
        }
    }

    /// Whether the engine needs an API key.
    pub fn needs_api_key(self) -> bool {
        !matches!(self, Self::Searxng)
    }

    /// The documented path appended to the base URL.
    fn path(self) -> &'static str {
        match self {
            Self::SerpApi => "/search.json",
            Self::Google => "/customsearch/v1",
            Self::Bing => "/v7.0/search",
            Self::Brave => "/res/v1/web/search",
            Self::Searxng => "/search",
        }
    }
}

impl fmt::Display for SearchEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An engine name that is not one of [`SearchEngine::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Unknown search engine {given:?}; use serpapi, google, bing, brave or searxng")]
pub struct ParseSearchEngineError {
    /// The name as given.
    pub given: String,
}

impl FromStr for SearchEngine {
    type Err = ParseSearchEngineError;

    /// Case-insensitive; surrounding whitespace is ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|e| e.as_str() == wanted)
            .ok_or_else(|| ParseSearchEngineError {
                given: s.to_owned(),
            })
    }
}

/// How `web_search` reaches its engine: the `[search]` table of the config file, overridden by
/// the `TOOLGATE_SEARCH_*` environment variables ([`SearchConfig::with_env`]). Blank values
/// count as unset. `Debug` never shows the API key.
///
/// ```
/// use toolgate_builtins::{SearchConfig, SearchEngine};
/// let config = SearchConfig { engine: Some("brave".into()), ..SearchConfig::default() }
///     .with_vars(|name| (name == "TOOLGATE_SEARCH_API_KEY").then(|| "secret".to_owned()));
/// assert_eq!(config.engine_kind(), Ok(Some(SearchEngine::Brave)));
/// assert!(!format!("{config:?}").contains("secret"));
/// ```
#[derive(Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// `serpapi`, `google`, `bing`, `brave` or `searxng`; checked when the tool runs (see
    /// [`SearchConfig::engine_kind`] to check it earlier).
    #[schemars(extend("enum" = ["serpapi", "google", "bing", "brave", "searxng"]))]
    pub engine: Option<String>,
    /// The engine's API key (not needed for SearXNG).
    pub api_key: Option<String>,
    /// Google Custom Search's engine id.
    pub cx: Option<String>,
    /// Scheme, host, port (and for SearXNG, any path prefix) standing in for the engine's
    /// official endpoint; the engine's documented path is appended. Required for SearXNG.
    pub base_url: Option<String>,
}

impl fmt::Debug for SearchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchConfig")
            .field("engine", &self.engine)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("cx", &self.cx)
            .field("base_url", &self.base_url)
            .finish()
    }
}

impl SearchConfig {
    /// This configuration with the process environment's `TOOLGATE_SEARCH_ENGINE`,
    /// `TOOLGATE_SEARCH_API_KEY`, `TOOLGATE_SEARCH_CX` and `TOOLGATE_SEARCH_BASE_URL` taking
    /// precedence where they are set and not blank.
    #[must_use]
    pub fn with_env(self) -> Self {
        self.with_vars(|name| std::env::var(name).ok())
    }

    /// [`Self::with_env`] with the variables read through `var` (for tests and embedders).
    #[must_use]
    pub fn with_vars(mut self, var: impl Fn(&str) -> Option<String>) -> Self {
        override_from(&mut self.engine, ENV_SEARCH_ENGINE, &var);
        override_from(&mut self.api_key, ENV_SEARCH_API_KEY, &var);
        override_from(&mut self.cx, ENV_SEARCH_CX, &var);
        override_from(&mut self.base_url, ENV_SEARCH_BASE_URL, &var);
        self
    }

    /// The configured engine: `Ok(None)` when none is set, an error when the name is unknown.
    pub fn engine_kind(&self) -> Result<Option<SearchEngine>, ParseSearchEngineError> {
        non_blank(self.engine.clone())
            .map(|name| name.parse())
            .transpose()
    }

    /// Everything a search needs, or an `unavailable` error naming the missing setting.
    fn endpoint(&self) -> Result<Endpoint, ToolError> {
        let not_configured = |msg: String| ToolError::unavailable(msg).permanent();
        let engine = match self.engine_kind() {
            Ok(Some(engine)) => engine,
            Ok(None) => {
                return Err(not_configured(format!(
                    "web_search has no engine configured; {ENGINE_SETTING}"
                )));
            }
            Err(e) => {
                return Err(not_configured(format!(
                    "web_search engine {:?} is not known; {ENGINE_SETTING}",
                    e.given
                )));
            }
        };
        let label = engine.label();
        let api_key = non_blank(self.api_key.clone());
        if engine.needs_api_key() && api_key.is_none() {
            return Err(not_configured(format!(
                "web_search with {label} needs an API key; set {KEY_SETTING}"
            )));
        }
        let cx = non_blank(self.cx.clone());
        if engine == SearchEngine::Google && cx.is_none() {
            return Err(not_configured(format!(
                "web_search with {label} needs the id of a Programmable Search Engine (cx); set TOOLGATE_SEARCH_CX or [search] cx in the config file"
            )));
        }
        let base = match (non_blank(self.base_url.clone()), engine.official_base_url()) {
            (Some(base), _) => base,
            (None, Some(official)) => official.to_owned(),
            (None, None) => {
                return Err(not_configured(format!(
                    "web_search with {label} needs the address of a SearXNG instance (for example https://searx.example.org); set {BASE_SETTING}"
                )));
            }
        };
        let base = Url::parse(&base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| {
                not_configured(format!(
                    "web_search base URL {base:?} is not an http:// or https:// address; fix {BASE_SETTING}"
                ))
            })?;
        Ok(Endpoint {
            engine,
            base,
            api_key: if engine.needs_api_key() {
                api_key
            } else {
                None
            },
            cx,
        })
    }
}

/// A resolved configuration.
struct Endpoint {
    engine: SearchEngine,
    base: Url,
    api_key: Option<String>,
    cx: Option<String>,
}

impl Endpoint {
    fn key(&self) -> &str {
        self.api_key.as_deref().unwrap_or("")
    }

    /// The request for `query`, asking for `count` results where the API allows.
    fn request(&self, query: &str, count: u64) -> HttpRequest {
        let mut url = self.base.clone();
        let path = format!("{}{}", url.path().trim_end_matches('/'), self.engine.path());
        url.set_path(&path);
        url.set_query(None);
        url.set_fragment(None);
        let count = count.to_string();
        let mut headers: Vec<(&str, &str)> = vec![("Accept", "application/json")];
        {
            let mut q = url.query_pairs_mut();
            match self.engine {
                SearchEngine::SerpApi => {
                    q.append_pair("engine", "google")
                        .append_pair("q", query)
                        .append_pair("num", &count)
                        .append_pair("api_key", self.key());
                }
                SearchEngine::Google => {
                    let num = count_capped(&count, 10);
                    q.append_pair("key", self.key())
                        .append_pair("cx", self.cx.as_deref().unwrap_or(""))
                        .append_pair("q", query)
                        .append_pair("num", &num);
                }
                SearchEngine::Bing => {
                    q.append_pair("q", query)
                        .append_pair("count", &count)
                        .append_pair("responseFilter", "Webpages");
                    headers.push(("Ocp-Apim-Subscription-Key", self.key()));
                }
                SearchEngine::Brave => {
                    let n = count_capped(&count, 20);
                    q.append_pair("q", query).append_pair("count", &n);
                    headers.push(("X-Subscription-Token", self.key()));
                }
                SearchEngine::Searxng => {
                    q.append_pair("q", query).append_pair("format", "json");
                }
            }
        }
        headers
            .into_iter()
            .fold(HttpRequest::get(url.as_str()), |r, (k, v)| r.header(k, v))
    }

    fn secrets(&self) -> Vec<&str> {
        self.api_key.as_deref().into_iter().collect()
    }
}

fn count_capped(count: &str, max: u64) -> String {
    count
        .parse::<u64>()
        .map_or(count.to_owned(), |n| n.min(max).to_string())
}

/// `web_search`: `{query, num_results}` → `{results: [{title, snippet, url}]}`.
#[derive(Clone, Debug)]
pub struct WebSearch {
    config: SearchConfig,
    limits: Limits,
    definition: ToolDefinition,
}

impl WebSearch {
    /// The tool using `config` (usually `SearchConfig` from the config file `.with_env()`).
    /// A missing or wrong setting is reported by each call, not here.
    pub fn new(config: SearchConfig) -> Self {
        let definition = ToolBuilder::new(WEB_SEARCH, WEB_SEARCH_DESCRIPTION)
            .title("Web search")
            .category(Category::Network)
            .effect(Effect::Read)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .idempotent(true)
            .param(
                Parameter::new("query", ParamType::String)
                    .description("What to search for, as typed into a search box, e.g. \"rust async cancellation\"")
                    .schema(json!({"minLength": 1, "pattern": "\\S"}))
                    .required(),
            )
            .param(
                Parameter::new("num_results", ParamType::Integer)
                    .description("How many results to return, 1 to 20")
                    .schema(json!({"minimum": 1, "maximum": MAX_SEARCH_RESULTS}))
                    .default_value(json!(5)),
            )
            .permission("tool.network.search")
            .constraints(Constraints {
                timeout_ms: Some(TOOL_TIMEOUT_MS),
                ..Constraints::default()
            })
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "results": {
                        "type": "array",
                        "maxItems": MAX_SEARCH_RESULTS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "title": {"type": "string", "description": "The page's title"},
                                "snippet": {"type": "string", "description": "A short extract chosen by the engine (may be empty)"},
                                "url": {"type": "string", "description": "The page's address"}
                            },
                            "required": ["title", "snippet", "url"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["results"],
                "additionalProperties": false
            }))
            .tag("web")
            .tag("search")
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

    /// Time limit of one engine request (default 15 s; the tool's own timeout is 20 s).
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.limits.timeout = timeout;
        self
    }

    /// Largest engine response accepted (default 2 MiB).
    #[must_use]
    pub fn with_max_response_bytes(mut self, bytes: u64) -> Self {
        self.limits.max_bytes = bytes;
        self
    }

    /// The configuration the tool uses.
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    async fn search(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let query = string_arg(args, "query")?.trim();
        if query.is_empty() {
            return Err(ToolError::validation(
                "query is empty; give the words to search for",
            ));
        }
        let wanted = match args.get("num_results") {
            None | Some(Value::Null) => 5,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_SEARCH_RESULTS).contains(n))
                .ok_or_else(|| {
                    ToolError::validation(format!(
                        "num_results must be a whole number from 1 to {MAX_SEARCH_RESULTS}, got {v}"
                    ))
                })?,
        };
        let endpoint = self.config.endpoint()?;
        let label = endpoint.engine.label();
        let secrets = endpoint.secrets();
        let response = send(ctx, endpoint.request(query, wanted), self.limits)
            .await
            .map_err(|e| in_context(e, &format!("Searching with {label} failed"), &secrets))?;
        let results = parse_response(endpoint.engine, &response, self.config.base_url.is_some())
            .map_err(|e| scrubbed(e, &secrets))?;
        let results: Vec<Value> = results
            .into_iter()
            .take(usize::try_from(wanted).unwrap_or(usize::MAX))
            .map(|r| json!({"title": r.title, "snippet": r.snippet, "url": r.url}))
            .collect();
        Ok(json!({ "results": results }))
    }
}

impl Tool for WebSearch {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move { self.search(&args, &ctx).await })
    }
}

/// One search hit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hit {
    title: String,
    snippet: String,
    url: String,
}

/// SerpAPI's message for a search without results, which it sends as an `error`.
const SERPAPI_NO_RESULTS: &str = "hasn't returned any results";

/// Turns an engine's answer into hits, or the error it means.
fn parse_response(
    engine: SearchEngine,
    response: &HttpResponse,
    custom_base: bool,
) -> Result<Vec<Hit>, ToolError> {
    let label = engine.label();
    if !(200..300).contains(&response.status) {
        return Err(status_error(engine, response, custom_base));
    }
    let hint = if custom_base {
        format!("; check that {BASE_SHORT} is the address of {label}")
    } else {
        "; the engine may be having problems, try again later".to_owned()
    };
    let body = parse_json(&response.body, label, &hint)?;
    if !body.is_object() {
        return Err(ToolError::execution(format!(
            "{label} returned JSON that is not an object, so it is not a search response{hint}"
        )));
    }
    if engine == SearchEngine::SerpApi
        && let Some(message) = body.get("error").and_then(Value::as_str)
    {
        if message.contains(SERPAPI_NO_RESULTS) {
            return Ok(Vec::new());
        }
        return Err(classify(engine, response.status, message, response));
    }
    let (list, title_key, url_key, snippet_key) = match engine {
        SearchEngine::SerpApi => (body.get("organic_results"), "title", "link", "snippet"),
        SearchEngine::Google => (body.get("items"), "title", "link", "snippet"),
        SearchEngine::Bing => (body.pointer("/webPages/value"), "name", "url", "snippet"),
        SearchEngine::Brave => (body.pointer("/web/results"), "title", "url", "description"),
        SearchEngine::Searxng => (body.get("results"), "title", "url", "content"),
    };
    let Some(list) = list.filter(|l| !l.is_null()) else {
        return Ok(Vec::new());
    };
    let Some(items) = list.as_array() else {
        return Err(ToolError::execution(format!(
            "{label} returned results in an unexpected shape (not a list){hint}"
        )));
    };
    let markup = matches!(engine, SearchEngine::Brave | SearchEngine::Searxng);
    let clean = |v: Option<&Value>| {
        let s = v.and_then(Value::as_str).unwrap_or("");
        if markup {
            strip_tags(s)
        } else {
            collapse_whitespace(s)
        }
    };
    Ok(items
        .iter()
        .filter_map(|item| {
            let url = item.get(url_key).and_then(Value::as_str)?.trim();
            (!url.is_empty()).then(|| Hit {
                title: clean(item.get(title_key)),
                snippet: clean(item.get(snippet_key)),
                url: url.to_owned(),
            })
        })
        .collect())
}

/// The error an HTTP error status means.
fn status_error(engine: SearchEngine, response: &HttpResponse, custom_base: bool) -> ToolError {
    let label = engine.label();
    let status = response.status;
    let detail = error_detail(&response.body).unwrap_or_else(|| "no details given".to_owned());
    let detail = clause(&detail);
    let parsed: Option<Value> = serde_json::from_slice(&response.body).ok();
    let code = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/code")
                .or_else(|| v.pointer("/errors/0/code"))
                .or_else(|| v.pointer("/error/errors/0/reason"))
        })
        .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
        .unwrap_or_default();
    let reason = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/errors/0/reason"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let key_rejected = status == 401
        || (engine == SearchEngine::Google
            && status == 400
            && (detail.contains("API key") || reason == "keyInvalid"))
        || (engine == SearchEngine::Brave && code.contains("TOKEN"));
    let rate_limited = status == 429
        || (engine == SearchEngine::Brave && code == "RATE_LIMITED")
        || (engine == SearchEngine::Google
            && matches!(
                reason,
                "rateLimitExceeded"
                    | "dailyLimitExceeded"
                    | "userRateLimitExceeded"
                    | "quotaExceeded"
            ));
    let http = status_text(status);
    if engine == SearchEngine::Searxng && matches!(status, 401 | 403) {
        return ToolError::authorization(format!(
            "SearXNG refused the search ({http}): {detail}; make sure the instance ({BASE_SHORT}) enables the JSON format (search.formats in its settings.yml) and accepts requests from this host"
        ))
        .permanent();
    }
    if rate_limited {
        return ToolError::new(
            toolgate_core::ErrorKind::RateLimited,
            format!(
                "{label} is rate limiting searches ({http}): {detail}; {}, or raise the plan's limits",
                retry_hint(response)
            ),
        );
    }
    if key_rejected {
        return ToolError::authorization(format!(
            "{label} rejected the API key ({http}): {detail}; check {KEY_SETTING}"
        ))
        .permanent();
    }
    if status == 403 {
        return ToolError::authorization(format!(
            "{label} denied access ({http}): {detail}; check that the API key ({KEY_SHORT}) may use this API and has quota left"
        ))
        .permanent();
    }
    if status >= 500 {
        return ToolError::unavailable(format!(
            "{label} failed ({http}): {detail}; try again later"
        ));
    }
    let hint = if status == 404 && custom_base {
        format!("; check that {BASE_SHORT} is the address of {label}")
    } else {
        String::new()
    };
    ToolError::execution(format!(
        "{label} refused the search ({http}): {detail}{hint}"
    ))
    .permanent()
}

/// An error SerpAPI reports inside a successful response.
fn classify(
    engine: SearchEngine,
    status: u16,
    message: &str,
    response: &HttpResponse,
) -> ToolError {
    let label = engine.label();
    let detail = collapse_whitespace(message);
    let detail = clause(&detail);
    let lower = detail.to_ascii_lowercase();
    if lower.contains("api key") {
        ToolError::authorization(format!(
            "{label} rejected the API key (HTTP {status}): {detail}; check {KEY_SETTING}"
        ))
        .permanent()
    } else if lower.contains("run out of searches") || lower.contains("rate limit") {
        ToolError::new(
            toolgate_core::ErrorKind::RateLimited,
            format!(
                "{label} is rate limiting searches (HTTP {status}): {detail}; {}, or raise the plan's limits",
                retry_hint(response)
            ),
        )
    } else {
        ToolError::execution(format!("{label} reported an error: {detail}.")).permanent()
    }
}

/// Engine answers as seen by the parser, for unit tests of shapes the fake servers don't send.
#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::ErrorKind;

    fn ok(body: Value) -> HttpResponse {
        HttpResponse {
            status: 200,
            headers: vec![],
            body: body.to_string().into_bytes(),
        }
    }

    fn status(code: u16, body: Value) -> HttpResponse {
        HttpResponse {
            status: code,
            headers: vec![],
            body: body.to_string().into_bytes(),
        }
    }

    #[test]
    fn engine_names_parse_case_insensitively_and_list_the_choices() {
        for engine in SearchEngine::ALL {
            assert_eq!(engine.as_str().parse(), Ok(engine));
            assert_eq!(
                format!(" {} ", engine.as_str().to_uppercase()).parse(),
                Ok(engine)
            );
        }
        let err = "duckduckgo".parse::<SearchEngine>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "Unknown search engine \"duckduckgo\"; use serpapi, google, bing, brave or searxng"
        );
    }

    #[test]
    fn variables_override_the_file_only_when_not_blank() {
        let file = SearchConfig {
            engine: Some("google".into()),
            api_key: Some("file-key".into()),
            cx: Some("file-cx".into()),
            base_url: None,
        };
        let vars = |name: &str| match name {
            ENV_SEARCH_ENGINE => Some("bing".to_owned()),
            ENV_SEARCH_API_KEY => Some("   ".to_owned()),
            ENV_SEARCH_BASE_URL => Some("http://127.0.0.1:9".to_owned()),
            _ => None,
        };
        let merged = file.with_vars(vars);
        assert_eq!(merged.engine.as_deref(), Some("bing"));
        assert_eq!(merged.api_key.as_deref(), Some("file-key"));
        assert_eq!(merged.cx.as_deref(), Some("file-cx"));
        assert_eq!(merged.base_url.as_deref(), Some("http://127.0.0.1:9"));
    }

    #[test]
    fn config_reads_from_toml_like_json_and_refuses_unknown_fields() {
        let config: SearchConfig =
            serde_json::from_value(json!({"engine": "serpapi", "api_key": "k"})).unwrap();
        assert_eq!(config.engine_kind(), Ok(Some(SearchEngine::SerpApi)));
        let err = serde_json::from_value::<SearchConfig>(json!({"engin": "serpapi"})).unwrap_err();
        assert!(err.to_string().contains("unknown field `engin`"), "{err}");
    }

    #[test]
    fn debug_redacts_the_key() {
        let config = SearchConfig {
            engine: Some("serpapi".into()),
            api_key: Some("sk-very-secret".into()),
            ..SearchConfig::default()
        };
        let shown = format!("{config:?} {:?}", WebSearch::new(config.clone()));
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(shown.contains("[REDACTED]"), "{shown}");
    }

    #[test]
    fn requests_follow_each_api() {
        let endpoint = |engine: &str, base: Option<&str>| {
            SearchConfig {
                engine: Some(engine.into()),
                api_key: Some("K&=1".into()),
                cx: Some("CX".into()),
                base_url: base.map(str::to_owned),
            }
            .endpoint()
            .unwrap()
        };
        let r = endpoint("serpapi", None).request("a&b c", 7);
        assert_eq!(
            r.url,
            "https://serpapi.com/search.json?engine=google&q=a%26b+c&num=7&api_key=K%26%3D1"
        );
        let r = endpoint("google", None).request("x", 15);
        assert_eq!(
            r.url,
            "https://www.googleapis.com/customsearch/v1?key=K%26%3D1&cx=CX&q=x&num=10"
        );
        let r = endpoint("bing", None).request("x", 3);
        assert_eq!(
            r.url,
            "https://api.bing.microsoft.com/v7.0/search?q=x&count=3&responseFilter=Webpages"
        );
        assert!(
            r.headers
                .contains(&("Ocp-Apim-Subscription-Key".into(), "K&=1".into()))
        );
        let r = endpoint("brave", Some("http://127.0.0.1:1/")).request("x", 20);
        assert_eq!(r.url, "http://127.0.0.1:1/res/v1/web/search?q=x&count=20");
        assert!(
            r.headers
                .contains(&("X-Subscription-Token".into(), "K&=1".into()))
        );
        let r = endpoint("searxng", Some("https://searx.example.org/searx/?x=1")).request("x", 5);
        assert_eq!(
            r.url,
            "https://searx.example.org/searx/search?q=x&format=json"
        );
        assert!(r.headers.iter().all(|(_, v)| !v.contains("K&=1")));
    }

    #[test]
    fn missing_settings_are_named() {
        let err = |config: SearchConfig| config.endpoint().err().unwrap();
        let e = err(SearchConfig::default());
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(!e.is_retryable());
        assert_eq!(
            e.message(),
            "web_search has no engine configured; set TOOLGATE_SEARCH_ENGINE (serpapi, google, bing, brave or searxng) or [search] engine in the config file"
        );
        let e = err(SearchConfig {
            engine: Some("yahoo".into()),
            ..SearchConfig::default()
        });
        assert!(e.message().contains("\"yahoo\" is not known"), "{e}");
        let e = err(SearchConfig {
            engine: Some("searxng".into()),
            base_url: Some("ftp://x".into()),
            ..SearchConfig::default()
        });
        assert!(
            e.message().contains("not an http:// or https:// address"),
            "{e}"
        );
    }

    #[test]
    fn serpapi_no_results_error_is_an_empty_list() {
        let r = ok(
            json!({"search_metadata": {"status": "Success"}, "error": "Google hasn't returned any results for this query."}),
        );
        assert_eq!(parse_response(SearchEngine::SerpApi, &r, false), Ok(vec![]));
    }

    #[test]
    fn serpapi_errors_inside_200_are_classified() {
        let r = ok(
            json!({"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"}),
        );
        let e = parse_response(SearchEngine::SerpApi, &r, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Authorization);
        let r = ok(json!({"error": "Your account has run out of searches."}));
        let e = parse_response(SearchEngine::SerpApi, &r, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RateLimited);
        let r = ok(json!({"error": "Unsupported `xx` location."}));
        let e = parse_response(SearchEngine::SerpApi, &r, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Execution);
        assert_eq!(
            e.message(),
            "SerpAPI reported an error: Unsupported `xx` location."
        );
    }

    #[test]
    fn google_bad_key_is_a_400_and_quota_a_403() {
        let bad_key = status(
            400,
            json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "errors": [{"message": "API key not valid. Please pass a valid API key.", "domain": "global", "reason": "badRequest"}], "status": "INVALID_ARGUMENT"}}),
        );
        let e = parse_response(SearchEngine::Google, &bad_key, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Authorization);
        let quota = status(
            403,
            json!({"error": {"code": 403, "message": "Daily Limit Exceeded.", "errors": [{"message": "Daily Limit Exceeded.", "domain": "usageLimits", "reason": "dailyLimitExceeded"}]}}),
        );
        let e = parse_response(SearchEngine::Google, &quota, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RateLimited);
    }

    #[test]
    fn brave_invalid_token_is_a_422() {
        let r = status(
            422,
            json!({"type": "ErrorResponse", "error": {"id": "x", "status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid."}, "time": 1}),
        );
        let e = parse_response(SearchEngine::Brave, &r, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Authorization);
        assert_eq!(
            e.message(),
            "Brave Search rejected the API key (HTTP 422 Unprocessable Entity): The provided subscription token is invalid; check TOOLGATE_SEARCH_API_KEY or [search] api_key in the config file"
        );
    }

    #[test]
    fn results_without_url_are_skipped_and_missing_lists_are_empty() {
        let r = ok(
            json!({"items": [{"title": "no link"}, {"title": " A\n title ", "link": "https://a.test/"}]}),
        );
        assert_eq!(
            parse_response(SearchEngine::Google, &r, false),
            Ok(vec![Hit {
                title: "A title".into(),
                snippet: String::new(),
                url: "https://a.test/".into()
            }])
        );
        let r = ok(json!({"_type": "SearchResponse", "queryContext": {"originalQuery": "x"}}));
        assert_eq!(parse_response(SearchEngine::Bing, &r, false), Ok(vec![]));
        let r = ok(json!({"results": {"not": "a list"}}));
        let e = parse_response(SearchEngine::Searxng, &r, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Execution);
        let r = ok(json!([1, 2]));
        let e = parse_response(SearchEngine::Searxng, &r, false).unwrap_err();
        assert!(e.message().contains("not an object"), "{e}");
    }
}
