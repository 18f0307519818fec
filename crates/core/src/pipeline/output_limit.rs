//! The tool's output limit (`max_output_bytes`), in one place: [`cap`] cuts the data a call
//! returned and fits the content blocks attached beside it into what is left, side by side.

use serde_json::Value;

use crate::content::Content;

/// A call's output after the tool's output limit.
#[derive(Debug)]
pub(super) struct Capped {
    /// The data, cut if it was over the limit.
    pub(super) data: Value,
    /// The content blocks that fit, plus a note naming those left out.
    pub(super) content: Vec<Content>,
    /// Whether anything was cut or left out.
    pub(super) truncated: bool,
}

/// Applies the output limit of `max` bytes to everything a call returned: the data first (cut
/// as [`cap_output`] does), then the content blocks, which share what the data leaves of the
/// limit: blocks are kept in order while they fit, the rest are left out and named.
pub(super) fn cap(data: Value, mut content: Vec<Content>, max: usize) -> Capped {
    let (data, data_cut) = cap_output(data, max);
    let content_cut =
        !content.is_empty() && fit_content(&mut content, max.saturating_sub(output_len(&data)));
    Capped {
        data,
        content,
        truncated: data_cut || content_cut,
    }
}

/// Cuts output larger than `max` bytes (as JSON) on a UTF-8 boundary. A string is cut as a
/// string; any other value becomes its JSON text, cut.
fn cap_output(data: Value, max: usize) -> (Value, bool) {
    if let Value::String(s) = &data {
        if s.len() <= max {
            return (data, false);
        }
        return (Value::String(cut_utf8(s, max).to_owned()), true);
    }
    if matches!(data, Value::Null | Value::Bool(_) | Value::Number(_)) {
        return (data, false);
    }
    // Measure without building the text: most outputs fit, and this runs on every call.
    if json_len_at_most(&data, max) {
        return (data, false);
    }
    let text = data.to_string();
    (Value::String(cut_utf8(&text, max).to_owned()), true)
}

/// The length of `value` as compact JSON, measured without building the text.
fn json_len(value: &Value) -> usize {
    let mut count = Count {
        written: 0,
        max: usize::MAX,
    };
    let _ = serde_json::to_writer(&mut count, value);
    count.written
}

/// Counts bytes written; fails once more than `max` were.
struct Count {
    written: usize,
    max: usize,
}

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written = self.written.saturating_add(buf.len());
        if self.written > self.max {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether `value` serialized as compact JSON is at most `max` bytes; stops writing as soon as
/// it is over (so it costs no allocation and at most `max` bytes of writing).
pub fn json_len_at_most(value: &Value, max: usize) -> bool {
    serde_json::to_writer(&mut Count { written: 0, max }, value).is_ok()
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn cut_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Bytes `data` counts toward the output limit: a string's text, anything else its compact JSON.
fn output_len(data: &Value) -> usize {
    match data {
        Value::String(s) => s.len(),
        other => json_len(other),
    }
}

/// Keeps the longest run of leading blocks whose payloads fit in `budget` bytes; when blocks are
/// left out, a text block saying so takes their place (it does not count). Whether any was.
fn fit_content(content: &mut Vec<Content>, budget: usize) -> bool {
    let mut used = 0usize;
    let keep = content
        .iter()
        .take_while(|block| {
            used = used.saturating_add(block.payload_len());
            used <= budget
        })
        .count();
    if keep == content.len() {
        return false;
    }
    let left_out: usize = content[keep..].iter().map(Content::payload_len).sum();
    let count = content.len() - keep;
    content.truncate(keep);
    content.push(Content::text(format!(
        "[toolgate: {count} content block(s) of {left_out} bytes left out: the result is over the tool's max_output_bytes]"
    )));
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn data_and_content_share_one_limit() {
        // Everything fits: nothing changes.
        let capped = cap(json!("1234"), vec![Content::text("abcd")], 8);
        assert_eq!(capped.data, json!("1234"));
        assert_eq!(capped.content, vec![Content::text("abcd")]);
        assert!(!capped.truncated);

        // The data fits, the second block would pass the limit: it is left out and named.
        let capped = cap(
            json!("1234"),
            vec![Content::text("ab"), Content::text("cdef")],
            8,
        );
        assert_eq!(capped.data, json!("1234"));
        assert_eq!(capped.content.len(), 2, "{:?}", capped.content);
        assert_eq!(capped.content[0], Content::text("ab"));
        assert!(capped.truncated);

        // The data alone is over the limit: it is cut, and no block fits beside it.
        let capped = cap(json!("123456789"), vec![Content::text("a")], 4);
        assert_eq!(capped.data, json!("1234"));
        assert_eq!(capped.content.len(), 1);
        assert_ne!(capped.content[0], Content::text("a"));
        assert!(capped.truncated);

        // Without content only the data counts.
        let capped = cap(json!({"k": "v"}), Vec::new(), 4);
        assert_eq!(capped.data, json!("{\"k\""));
        assert!(capped.content.is_empty());
        assert!(capped.truncated);
    }

    #[test]
    fn annotations_meta_and_links_count_toward_the_limit() {
        let mut meta = serde_json::Map::new();
        meta.insert("note".into(), json!("x".repeat(20)));
        // Four bytes of text, but its _meta makes it larger than the limit: left out.
        let capped = cap(json!("12"), vec![Content::text("abcd").with_meta(meta)], 10);
        assert!(capped.truncated);
        assert_eq!(capped.content.len(), 1);
        assert!(
            matches!(&capped.content[0], Content::Text { text, .. } if text.contains("1 content block(s)")),
            "{:?}",
            capped.content
        );
        // A resource link counts its URI and name.
        let link = Content::resource_link("test://a-long-uri", "a-name");
        assert!(cap(json!(null), vec![link.clone()], 20).truncated);
        assert!(!cap(json!(null), vec![link], 30).truncated);
    }
}
