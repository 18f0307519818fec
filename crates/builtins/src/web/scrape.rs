//! `web_scraper` (seed 001): `{url, selector?}` → `{text, title}`, the readable text of a page.
//!
//! HTML is parsed with the `scraper` crate; see [`super::text`] for what "readable" means
//! (scripts, styles, `noscript`, `template`, SVG and `hidden` elements dropped, blocks on lines
//! of their own, whitespace collapsed). With a CSS `selector`, `text` is the text of every
//! matching element (outermost matches only, in document order, separated by blank lines); no
//! match is an `execution` error, an invalid selector a `validation` error naming it. `title`
//! is the document's `<title>`, or `""`.
//!
//! Plain text (`text/*`) and JSON or XML bodies are returned as they are, with `title: ""`; a
//! selector on them is a `validation` error. Other content types (images, PDF,
//! `application/octet-stream`…) are an `execution` error naming the type. A response without a
//! `Content-Type` is sniffed. Bodies are decoded as UTF-8 (invalid bytes replaced) unless the
//! header names ISO-8859-1 / Windows-1252 / US-ASCII. The body may be at most 2 MiB (see
//! [`WebScraper::with_max_response_bytes`]); the fetch takes at most 20 s, and parsing the HTML
//! again at most as long (it runs on the blocking pool, in chunks, and stops on the time limit
//! or cancellation: html5ever is quadratic in the nesting depth, so a hostile page could
//! otherwise hold a CPU for minutes).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ego_tree::NodeId;
use scraper::{ElementRef, Html, Selector};
use serde_json::{Value, json};
use toolgate_core::{
    BoxFuture, CancellationToken, Category, Consequence, Constraints, Effect, ErrorKind,
    HttpRequest, HttpResponse, ParamType, Parameter, Tool, ToolBuilder, ToolContext,
    ToolDefinition, ToolError, ToolOutput,
};
use url::Url;

use super::text::{Stop, document_text, document_title, element_text, parse_document_bounded};
use super::{DEFAULT_MAX_RESPONSE_BYTES, Limits, retry_hint, status_text};
use crate::args::string_arg;

/// The tool's name.
pub const WEB_SCRAPER: &str = "web_scraper";

/// The description a model routes by.
pub const WEB_SCRAPER_DESCRIPTION: &str = "Fetches one web page and returns {text, title}: \
its readable text (scripts, styles and markup removed, one line per paragraph, list item or \
table row) and its <title>. Use it to read a page found with web_search or given by the user. \
url must be an http:// or https:// address. selector is an optional CSS selector (e.g. \
\"article\", \"#content\", \"table.prices tr\") that limits text to the matching elements; a \
selector that matches nothing fails with a message, so call again without it. Plain-text and \
JSON pages are returned as they are; images, PDFs and other binary files are refused. Pages \
larger than 2 MiB are refused, and addresses the network policy forbids (private networks, \
for instance) fail with a message.";

/// Default time limit of the fetch (the tool's own timeout is 30 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
const TOOL_TIMEOUT_MS: u64 = 30_000;

const ACCEPT: &str =
    "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.1";

/// `web_scraper`: `{url, selector?}` → `{text, title}`.
#[derive(Clone, Debug)]
pub struct WebScraper {
    limits: Limits,
    definition: ToolDefinition,
}

impl Default for WebScraper {
    fn default() -> Self {
        Self::new()
    }
}

impl WebScraper {
    /// The tool with the default limits (20 s, 2 MiB).
    pub fn new() -> Self {
        let definition = ToolBuilder::new(WEB_SCRAPER, WEB_SCRAPER_DESCRIPTION)
            .title("Web page reader")
            .category(Category::Network)
            .effect(Effect::Read)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .idempotent(true)
            .param(
                Parameter::new("url", ParamType::String)
                    .description("The page's address, http:// or https://, e.g. \"https://example.org/post\"")
                    .schema(json!({"format": "uri", "minLength": 1, "maxLength": 8192}))
                    .required(),
            )
            .param(
                Parameter::new("selector", ParamType::String)
                    .description("Optional CSS selector limiting the text to matching elements, e.g. \"article\" or \"#content p\"")
                    .schema(json!({"minLength": 1, "maxLength": 1024})),
            )
            .permission("tool.network.fetch")
            .constraints(Constraints {
                timeout_ms: Some(TOOL_TIMEOUT_MS),
                ..Constraints::default()
            })
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The readable text of the page or of the selected elements"},
                    "title": {"type": "string", "description": "The page's <title>, or empty"}
                },
                "required": ["text", "title"],
                "additionalProperties": false
            }))
            .tag("web")
            .definition()
            .clone();
        Self {
            limits: Limits {
                timeout: REQUEST_TIMEOUT,
                max_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            },
            definition,
        }
    }

    /// Time limit of the fetch, and separately of parsing the page (default 20 s; the tool's own
    /// timeout is 30 s).
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.limits.timeout = timeout;
        self
    }

    /// Largest page accepted (default 2 MiB).
    #[must_use]
    pub fn with_max_response_bytes(mut self, bytes: u64) -> Self {
        self.limits.max_bytes = bytes;
        self
    }

    async fn scrape(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let raw_url = string_arg(args, "url")?.trim();
        let url = Url::parse(raw_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| {
                ToolError::validation(format!(
                    "url must be an absolute http:// or https:// address, got {raw_url:?}"
                ))
            })?;
        let selector = match args.get("selector") {
            None | Some(Value::Null) => None,
            Some(_) => Some(parse_selector(string_arg(args, "selector")?)?),
        };

        let request = HttpRequest::get(url.as_str()).header("Accept", ACCEPT);
        // The client's messages already name the address (without its query string).
        let response = super::send(ctx, request, self.limits).await?;
        check_status(&url, &response)?;

        let content_type = response.header("content-type").unwrap_or("").to_owned();
        let (mime, charset) = parse_content_type(&content_type);
        let kind = match mime.as_str() {
            "" => sniff(&response.body),
            m => classify(m),
        };
        let body = decode(&response.body, charset.as_deref());
        match kind {
            Kind::Html => {
                let cancel = ctx.cancellation().clone();
                let deadline = Instant::now() + self.limits.timeout;
                let page = url.to_string();
                let (title, text) = tokio::task::spawn_blocking(move || {
                    read_html(&body, selector, &page, deadline, &cancel)
                })
                .await
                .map_err(|e| {
                    ToolError::execution(format!("Reading the page stopped unexpectedly: {e}"))
                })??;
                Ok(json!({ "text": text, "title": title }))
            }
            Kind::Text => {
                if let Some((raw, _)) = &selector {
                    return Err(ToolError::validation(format!(
                        "selector {raw:?} needs an HTML page, but {url} is {}; call again without selector",
                        describe(&mime)
                    )));
                }
                Ok(json!({ "text": body.trim_end(), "title": "" }))
            }
            Kind::Other => Err(ToolError::execution(format!(
                "{url} is {}, not a web page; web_scraper reads HTML, plain text and JSON only",
                describe(&mime)
            ))
            .permanent()),
        }
    }
}

impl Tool for WebScraper {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move { self.scrape(&args, &ctx).await })
    }
}

/// Title and text of an HTML page (CPU work: run it off the async runtime). Parsing stops at
/// `deadline` and on cancellation.
fn read_html(
    body: &str,
    selector: Option<(String, Selector)>,
    url: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(String, String), ToolError> {
    let doc = parse_document_bounded(body, deadline, || cancel.is_cancelled()).map_err(|stop| {
        match stop {
            Stop::Cancelled => ToolError::cancelled(),
            Stop::Deadline => ToolError::execution(format!(
                "Reading {url} took longer than the time limit: its HTML is too large or too deeply nested to parse"
            ))
            .permanent(),
        }
    })?;
    let title = document_title(&doc);
    let text = match &selector {
        None => document_text(&doc),
        Some((raw, sel)) => selected_text(&doc, sel).ok_or_else(|| {
            ToolError::execution(format!(
                "No element on {url} matches the selector {raw:?}; try a broader selector, or call again without selector to get the whole page's text"
            ))
            .permanent()
        })?,
    };
    Ok((title, text))
}

fn parse_selector(raw: &str) -> Result<(String, Selector), ToolError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(ToolError::validation(
            "selector is empty; give a CSS selector such as \"article\", or leave selector out",
        ));
    }
    Selector::parse(trimmed)
        .map(|s| (trimmed.to_owned(), s))
        .map_err(|e| {
            ToolError::validation(format!(
                "Invalid CSS selector {trimmed:?}: {e}; use a selector such as \"article\", \"#content\" or \"div.post p\""
            ))
        })
}

/// The text of every outermost match, separated by blank lines; `None` when nothing matches.
/// Linear in the document: a match's subtree is marked once, and later matches inside it are
/// recognised by a set lookup rather than a walk up their ancestors.
fn selected_text(doc: &Html, selector: &Selector) -> Option<String> {
    let mut taken: Vec<ElementRef<'_>> = Vec::new();
    let mut covered: HashSet<NodeId> = HashSet::new();
    for el in doc.select(selector) {
        if covered.contains(&el.id()) {
            continue;
        }
        covered.extend(el.descendants().map(|n| n.id()));
        taken.push(el);
    }
    if taken.is_empty() {
        return None;
    }
    let parts: Vec<String> = taken
        .into_iter()
        .map(element_text)
        .filter(|t| !t.is_empty())
        .collect();
    Some(parts.join("\n\n"))
}

fn check_status(url: &Url, response: &HttpResponse) -> Result<(), ToolError> {
    let status = response.status;
    let http = status_text(status);
    match status {
        200..=299 => Ok(()),
        429 => Err(ToolError::new(
            ErrorKind::RateLimited,
            format!(
                "{url} answered {http}: the site is rate limiting requests; {}",
                retry_hint(response)
            ),
        )),
        500..=599 => Err(ToolError::unavailable(format!(
            "{url} answered {http}: the site has a problem; try again later"
        ))),
        401 | 403 => Err(ToolError::execution(format!(
            "{url} answered {http}: the site refuses access (it may need a login, or block automated clients); web_scraper cannot log in"
        ))
        .permanent()),
        404 | 410 => Err(ToolError::execution(format!(
            "{url} answered {http}: there is no such page; check the address"
        ))
        .permanent()),
        300..=399 => Err(ToolError::execution(format!(
            "{url} answered {http}, a redirect that was not followed{}",
            response
                .header("location")
                .map(|l| format!(" (to {l})"))
                .unwrap_or_default()
        ))
        .permanent()),
        _ => Err(ToolError::execution(format!("{url} answered {http}")).permanent()),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Other,
}

/// The media type (lowercase, no parameters) and charset of a `Content-Type` value.
fn parse_content_type(value: &str) -> (String, Option<String>) {
    let mut parts = value.split(';');
    let mime = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"').to_ascii_lowercase())
    });
    (mime, charset)
}

fn classify(mime: &str) -> Kind {
    match mime {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        m if m.starts_with("text/") => Kind::Text,
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/x-ndjson"
        | "application/ld+json" => Kind::Text,
        m if m.ends_with("+json") || m.ends_with("+xml") => Kind::Text,
        _ => Kind::Other,
    }
}

/// A guess for a response without `Content-Type`.
fn sniff(body: &[u8]) -> Kind {
    let head = &body[..body.len().min(1024)];
    if head.contains(&0) {
        return Kind::Other;
    }
    let start = String::from_utf8_lossy(head)
        .trim_start_matches('\u{feff}')
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || start.contains("<html")
    {
        return Kind::Html;
    }
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        // A character cut at the 1024-byte boundary is fine.
        Err(e) => e.error_len().is_none(),
    };
    if valid { Kind::Text } else { Kind::Other }
}

fn describe(mime: &str) -> String {
    if mime.is_empty() {
        "of an unknown type (no Content-Type, and the content is not text)".to_owned()
    } else {
        format!("{mime} content")
    }
}

/// The body as text: Latin-1 family charsets byte by byte, everything else as UTF-8 with
/// invalid bytes replaced; a byte-order mark is dropped.
fn decode(body: &[u8], charset: Option<&str>) -> String {
    let latin1 = matches!(
        charset,
        Some(
            "iso-8859-1" | "latin1" | "latin-1" | "windows-1252" | "cp1252" | "us-ascii" | "ascii"
        )
    );
    let text = if latin1 {
        body.iter().map(|b| char::from(*b)).collect()
    } else {
        String::from_utf8_lossy(body).into_owned()
    };
    match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(
            parse_content_type("Text/HTML; Charset=\"UTF-8\""),
            ("text/html".to_owned(), Some("utf-8".to_owned()))
        );
        assert_eq!(parse_content_type(""), (String::new(), None));
        assert_eq!(classify("text/html"), Kind::Html);
        assert_eq!(classify("text/csv"), Kind::Text);
        assert_eq!(classify("application/problem+json"), Kind::Text);
        assert_eq!(classify("image/png"), Kind::Other);
        assert_eq!(classify("application/pdf"), Kind::Other);
        assert_eq!(classify("application/octet-stream"), Kind::Other);
    }

    #[test]
    fn sniffing_without_content_type() {
        assert_eq!(sniff(b"  <!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(sniff(b"just words"), Kind::Text);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), Kind::Other);
        assert_eq!(sniff(&[0xff, 0xfe, 0xfd, b'a']), Kind::Other);
    }

    #[test]
    fn decoding() {
        assert_eq!(decode(b"caf\xe9", Some("iso-8859-1")), "café");
        assert_eq!(decode("\u{feff}café".as_bytes(), None), "café");
        assert_eq!(decode(b"caf\xe9", Some("utf-8")), "caf\u{fffd}");
    }

    #[test]
    fn selectors_take_outermost_matches_only() {
        let doc = Html::parse_document(
            "<div class=a>one<div class=a>inner</div></div><p>skip</p><div class=a>two</div>",
        );
        let sel = Selector::parse("div.a").unwrap();
        assert_eq!(
            selected_text(&doc, &sel).as_deref(),
            Some("one\ninner\n\ntwo")
        );
        let none = Selector::parse("table").unwrap();
        assert_eq!(selected_text(&doc, &none), None);
        assert_eq!(
            parse_selector("div[").unwrap_err().kind(),
            ErrorKind::Validation
        );
    }
}
