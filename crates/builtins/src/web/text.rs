//! Readable text from HTML: the visible text of a document or element, with scripts, styles and
//! other non-text elements dropped, block elements on lines of their own, list items marked
//! `- `, table cells separated by ` | ` and whitespace collapsed (kept inside `<pre>`).
//!
//! The walk is iterative, so deeply nested documents cannot overflow the stack. Parsing is the
//! expensive part: html5ever's tree builder is quadratic in the nesting depth (two megabytes of
//! `<div>`s take minutes), so [`parse_document_bounded`] feeds the parser in chunks and stops
//! when told to.

use std::time::Instant;

use ego_tree::iter::Edge;
use html5ever::tendril::TendrilSink;
use scraper::{ElementRef, Html, HtmlTreeSink, Node, StrTendril};

/// Bytes fed to the parser between two checks of the time limit.
const PARSE_CHUNK: usize = 8 * 1024;

/// Why a bounded parse stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The deadline passed.
    Deadline,
    /// The caller's cancellation fired.
    Cancelled,
}

/// Parses `html` as a document, checking `cancelled` and `deadline` every 8 KiB of input.
pub(crate) fn parse_document_bounded(
    html: &str,
    deadline: Instant,
    cancelled: impl Fn() -> bool,
) -> Result<Html, Stop> {
    let check = || {
        if cancelled() {
            Err(Stop::Cancelled)
        } else if Instant::now() >= deadline {
            Err(Stop::Deadline)
        } else {
            Ok(())
        }
    };
    let mut parser = html5ever::driver::parse_document(
        HtmlTreeSink::new(Html::new_document()),
        Default::default(),
    );
    let mut rest = html;
    while !rest.is_empty() {
        check()?;
        let mut cut = rest.len().min(PARSE_CHUNK);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        parser.process(StrTendril::from_slice(chunk));
        rest = tail;
    }
    check()?;
    Ok(parser.finish())
}

/// Elements whose content a reader never sees as text. `head` is here because its only
/// readable part, the title, is returned separately.
const SKIPPED: &[&str] = &[
    "head", "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed",
    "canvas", "audio", "video", "select", "datalist",
];

/// Elements that end a paragraph: a blank line before and after.
const PARAGRAPHS: &[&str] = &[
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "table",
    "figure",
    "hr",
];

/// Elements that start and end a line.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "body",
    "caption",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "footer",
    "form",
    "header",
    "hgroup",
    "html",
    "legend",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "option",
    "section",
    "summary",
    "tbody",
    "tfoot",
    "thead",
    "tr",
    "ul",
];

/// Accumulates text, deciding on separators lazily: a line break, a cell separator or a space
/// is written only once more visible text follows, so nothing dangles at the ends.
#[derive(Default)]
struct Writer {
    out: String,
    /// Line breaks wanted before the next text (1 = new line, 2 = blank line).
    pending_break: usize,
    pending_space: bool,
    pending_cell: bool,
    pending_bullet: bool,
}

impl Writer {
    fn request_break(&mut self, lines: usize) {
        self.pending_break = self.pending_break.max(lines);
    }

    fn trailing_newlines(&self) -> usize {
        self.out.chars().rev().take_while(|c| *c == '\n').count()
    }

    fn trim_trailing_spaces(&mut self) {
        let kept = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(kept);
    }

    /// Writes what is pending before visible text.
    fn flush(&mut self) {
        if !self.out.is_empty() {
            if self.pending_break > 0 {
                self.trim_trailing_spaces();
                let have = self.trailing_newlines();
                for _ in have..self.pending_break {
                    self.out.push('\n');
                }
            } else if self.pending_cell && !self.out.ends_with('\n') {
                self.trim_trailing_spaces();
                self.out.push_str(" | ");
            } else if self.pending_space && !self.out.ends_with([' ', '\n']) {
                self.out.push(' ');
            }
        }
        if self.pending_bullet {
            self.out.push_str("- ");
        }
        self.pending_break = 0;
        self.pending_space = false;
        self.pending_cell = false;
        self.pending_bullet = false;
    }

    /// Text outside `<pre>`: runs of whitespace become one space.
    fn text(&mut self, text: &str) {
        for c in text.chars() {
            if c.is_whitespace() {
                self.pending_space = true;
            } else {
                self.flush();
                self.out.push(c);
            }
        }
    }

    /// Text inside `<pre>`: kept as written (line ends normalized).
    fn preformatted(&mut self, text: &str) {
        for c in text.chars() {
            match c {
                '\r' => {}
                '\n' => {
                    self.flush();
                    self.trim_trailing_spaces();
                    self.out.push('\n');
                }
                c => {
                    self.flush();
                    self.out.push(c);
                }
            }
        }
    }

    fn finish(self) -> String {
        let lines: Vec<&str> = self.out.lines().map(str::trim_end).collect();
        lines.join("\n").trim().to_owned()
    }
}

/// The readable text of an element and its descendants. The element itself is never skipped,
/// so selecting a `<script>` (for example JSON-LD data) returns its content.
pub(crate) fn element_text(root: ElementRef<'_>) -> String {
    let mut w = Writer::default();
    let mut skipping = 0usize;
    let mut pre = 0usize;
    for edge in root.traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(el) => {
                    let name = el.name();
                    let is_root = node.id() == root.id();
                    if skipping > 0
                        || (!is_root && (SKIPPED.contains(&name) || el.attr("hidden").is_some()))
                    {
                        skipping += 1;
                        continue;
                    }
                    open(&mut w, name);
                    if name == "pre" {
                        pre += 1;
                    }
                }
                Node::Text(text) if skipping == 0 => {
                    if pre > 0 {
                        w.preformatted(text);
                    } else {
                        w.text(text);
                    }
                }
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(el) = node.value() {
                    if skipping > 0 {
                        skipping -= 1;
                        continue;
                    }
                    let name = el.name();
                    if name == "pre" {
                        pre = pre.saturating_sub(1);
                    }
                    close(&mut w, name);
                }
            }
        }
    }
    w.finish()
}

fn open(w: &mut Writer, name: &str) {
    match name {
        "br" => w.pending_break = (w.pending_break + 1).min(2),
        "td" | "th" => w.pending_cell = true,
        "li" => {
            w.request_break(1);
            w.pending_bullet = true;
        }
        "img" | "input" | "wbr" => w.pending_space = true,
        _ if PARAGRAPHS.contains(&name) => w.request_break(2),
        _ if BLOCKS.contains(&name) => w.request_break(1),
        _ => {}
    }
}

fn close(w: &mut Writer, name: &str) {
    if PARAGRAPHS.contains(&name) {
        w.request_break(2);
    } else if BLOCKS.contains(&name) {
        w.request_break(1);
        if name == "li" {
            w.pending_bullet = false;
        }
    } else if matches!(name, "td" | "th") {
        w.pending_space = true;
    }
}

/// The readable text of a whole document (its `<head>` left out).
pub(crate) fn document_text(doc: &Html) -> String {
    element_text(doc.root_element())
}

/// The document's `<title>` (outside SVG images), whitespace collapsed; empty when there is none.
pub(crate) fn document_title(doc: &Html) -> String {
    let title = doc.root_element().descendants().find(|node| {
        node.value()
            .as_element()
            .is_some_and(|el| el.name() == "title")
            && !node
                .ancestors()
                .any(|a| a.value().as_element().is_some_and(|el| el.name() == "svg"))
    });
    let Some(title) = title else {
        return String::new();
    };
    let raw: String = title
        .descendants()
        .filter_map(|n| n.value().as_text().map(|t| t.to_string()))
        .collect();
    collapse_whitespace(&raw)
}

/// Runs of whitespace become one space; the ends are trimmed.
pub(crate) fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A snippet that may carry HTML markup (`<strong>` highlights, entities such as `&amp;`) as
/// plain one-line text.
pub(crate) fn strip_tags(snippet: &str) -> String {
    if !snippet.contains(['<', '&']) {
        return collapse_whitespace(snippet);
    }
    let fragment = Html::parse_fragment(snippet);
    let raw: String = fragment
        .root_element()
        .descendants()
        .filter_map(|n| n.value().as_text().map(|t| t.to_string()))
        .collect();
    collapse_whitespace(&raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(html: &str) -> String {
        document_text(&Html::parse_document(html))
    }

    #[test]
    fn blocks_become_lines_and_whitespace_collapses() {
        let html = "<html><head><title> A  page </title><style>p{}</style></head><body>
            <h1>Heading</h1>\n<p>First   paragraph\n with <b>bold</b> text.</p>
            <div>One</div><div>Two</div><p>Line<br>break</p>
            <script>var x = 1;</script><noscript>enable js</noscript>
            <ul><li>alpha</li><li>beta <i>gamma</i></li></ul>
            <table><tr><th>Name</th><th>Age</th></tr><tr><td>Ann</td><td>30</td></tr></table>
            </body></html>";
        assert_eq!(
            text(html),
            "Heading\n\nFirst paragraph with bold text.\n\nOne\nTwo\n\nLine\nbreak\n\n- alpha\n- beta gamma\n\nName | Age\nAnn | 30"
        );
        assert_eq!(
            document_title(&Html::parse_document(html)),
            "A page".to_owned()
        );
    }

    #[test]
    fn preformatted_text_keeps_its_lines() {
        assert_eq!(
            text("<p>Code:</p><pre>fn main() {\n    run();\n}</pre><p>after</p>"),
            "Code:\n\nfn main() {\n    run();\n}\n\nafter"
        );
    }

    #[test]
    fn hidden_and_svg_content_is_dropped_and_svg_titles_ignored() {
        let html = "<body><svg><title>icon</title><text>svg text</text></svg><p hidden>secret</p><p>shown</p></body>";
        let doc = Html::parse_document(html);
        assert_eq!(document_text(&doc), "shown");
        assert_eq!(document_title(&doc), "");
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        // Built directly: parsing this much nesting would take html5ever a long while.
        let mut doc = Html::new_document();
        let mut node = doc.tree.root().id();
        for _ in 0..100_000 {
            let div = scraper::node::Element::new(
                html5ever::QualName::new(None, html5ever::ns!(html), html5ever::local_name!("div")),
                Vec::new(),
            );
            node = doc
                .tree
                .get_mut(node)
                .unwrap()
                .append(Node::Element(div))
                .id();
        }
        doc.tree
            .get_mut(node)
            .unwrap()
            .append(Node::Text(scraper::node::Text {
                text: "deep".into(),
            }));
        assert_eq!(document_text(&doc), "deep");
    }

    #[test]
    fn bounded_parse_matches_the_plain_parse_and_stops_when_told() {
        let html = format!("<title>T</title>{}", "<p>word é</p>".repeat(5_000));
        let far = Instant::now() + std::time::Duration::from_secs(600);
        let bounded = parse_document_bounded(&html, far, || false).unwrap();
        assert_eq!(
            document_text(&bounded),
            document_text(&Html::parse_document(&html))
        );
        assert_eq!(document_title(&bounded), "T");
        let calls = std::cell::Cell::new(0);
        let stop = parse_document_bounded(&html, far, || {
            calls.set(calls.get() + 1);
            calls.get() > 2
        });
        assert_eq!(stop.err(), Some(Stop::Cancelled));
        assert_eq!(calls.get(), 3);
        assert_eq!(
            parse_document_bounded(&html, Instant::now(), || false).err(),
            Some(Stop::Deadline)
        );
    }

    #[test]
    fn snippets_lose_markup_and_entities() {
        assert_eq!(
            strip_tags("The <strong>Rust</strong> &amp; <em>Cargo</em>\n book"),
            "The Rust & Cargo book"
        );
        assert_eq!(strip_tags("plain  text "), "plain text");
        assert_eq!(strip_tags(""), "");
    }
}
