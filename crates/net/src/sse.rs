//! Server-sent events: a byte stream cut into events, with a cap on each event rather than on
//! the stream (an MCP server's stream may live for hours; one event must still fit in memory).
//!
//! The parsing follows the WHATWG event-stream rules: lines end with CR, LF or CRLF; a blank
//! line ends an event; `data` lines are joined with LF; `event`, `id` and `retry` set their
//! field; lines starting with `:` are comments; an unfinished event at the end is dropped; a
//! leading byte-order mark is skipped. An event with only an `id` (a resumption point, as MCP
//! servers send before anything else) is still delivered, with empty data.

/// One server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` type, if given.
    pub event: Option<String>,
    /// The `data:` lines joined with LF (empty when the event had none).
    pub data: String,
    /// The `id:` field, if given (an id holding NUL is ignored, as the standard says).
    pub id: Option<String>,
    /// The `retry:` reconnection time in milliseconds, if given and a number.
    pub retry: Option<u64>,
}

/// An event (or a line) grew past the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventTooLarge {
    /// The cap in bytes.
    pub cap: u64,
}

/// Incremental parser: feed bytes, take complete events.
#[derive(Debug)]
pub struct SseParser {
    cap: u64,
    line: Vec<u8>,
    /// The last byte fed was a CR (a following LF belongs to the same line end).
    after_cr: bool,
    /// Still at the very start of the stream (a byte-order mark may follow).
    at_start: bool,
    /// Bytes of the event being built (field lines, comments not counted).
    event_bytes: u64,
    event: SseEvent,
    /// Some field was seen since the last dispatch.
    has_fields: bool,
    /// A `data` line was seen since the last dispatch (the next one is joined with LF).
    data_seen: bool,
    ready: std::collections::VecDeque<SseEvent>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A parser refusing any event (or single line) longer than `cap` bytes.
    pub fn new(cap: u64) -> Self {
        Self {
            cap: cap.max(1),
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            event_bytes: 0,
            event: SseEvent::default(),
            has_fields: false,
            data_seen: false,
            ready: std::collections::VecDeque::new(),
        }
    }

    /// Feeds bytes; complete events become available from [`SseParser::next_event`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), EventTooLarge> {
        if self.at_start {
            if self.line.is_empty() && bytes.len() >= BOM.len() {
                // The whole mark (or its absence) is in this chunk: no need to hold it.
                self.at_start = false;
                return self.feed_lines(bytes.strip_prefix(BOM).unwrap_or(bytes));
            }
            // The mark may arrive split across chunks: hold the start until it is decided.
            self.line.extend_from_slice(bytes);
            if self.line.len() < BOM.len() && BOM.starts_with(&self.line) {
                return Ok(());
            }
            self.at_start = false;
            let held = std::mem::take(&mut self.line);
            let rest = held.strip_prefix(BOM).unwrap_or(&held);
            return self.feed_lines(rest);
        }
        self.feed_lines(bytes)
    }

    fn feed_lines(&mut self, mut bytes: &[u8]) -> Result<(), EventTooLarge> {
        // A line that ended with CR in the previous chunk: an LF starting this one belongs to it.
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            bytes = bytes.strip_prefix(b"\n").unwrap_or(bytes);
        }
        // Line ends found with memchr (vectorised), not byte by byte: most of a call's answer
        // is one long `data:` line.
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            self.push_line_part(&bytes[..end])?;
            self.end_line()?;
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.push_line_part(bytes)
    }

    fn push_line_part(&mut self, part: &[u8]) -> Result<(), EventTooLarge> {
        if self.event_bytes + (self.line.len() + part.len()) as u64 > self.cap {
            return Err(EventTooLarge { cap: self.cap });
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), EventTooLarge> {
        // The line's buffer is kept for the next line (one allocation per stream, not per line).
        let line = std::mem::take(&mut self.line);
        let out = self.field_line(&line);
        self.line = line;
        self.line.clear();
        out
    }

    fn field_line(&mut self, line: &[u8]) -> Result<(), EventTooLarge> {
        if line.is_empty() {
            self.dispatch();
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        self.event_bytes += line.len() as u64 + 1;
        if self.event_bytes > self.cap {
            return Err(EventTooLarge { cap: self.cap });
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                if self.data_seen {
                    self.event.data.push('\n');
                }
                self.event.data.push_str(&value);
                self.data_seen = true;
            }
            b"event" => self.event.event = Some(value.into_owned()),
            b"id" if !value.contains('\0') => self.event.id = Some(value.into_owned()),
            b"retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.event.retry = Some(ms);
                }
            }
            _ => return Ok(()),
        }
        self.has_fields = true;
        Ok(())
    }

    fn dispatch(&mut self) {
        if self.has_fields {
            self.ready.push_back(std::mem::take(&mut self.event));
        }
        self.event = SseEvent::default();
        self.has_fields = false;
        self.data_seen = false;
        self.event_bytes = 0;
    }

    /// The next complete event, if any.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]], cap: u64) -> Result<Vec<SseEvent>, EventTooLarge> {
        let mut p = SseParser::new(cap);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c)?;
            while let Some(e) = p.next_event() {
                out.push(e);
            }
        }
        Ok(out)
    }

    fn data(s: &str) -> SseEvent {
        SseEvent {
            data: s.into(),
            ..SseEvent::default()
        }
    }

    #[test]
    fn fields_lines_and_line_ends() {
        let events = parse(
            &[
                b"\xEF\xBB\xBF: comment\r\nevent: message\r\nid: 7\r\ndata: {\"a\":1}\r\n\r\n",
                b"data: one\ndata:two\n\n",
                b"retry: 3000\nid\n\n",
                b"data: cr\r\r",
            ],
            1024,
        )
        .unwrap();
        assert_eq!(
            events,
            [
                SseEvent {
                    event: Some("message".into()),
                    data: "{\"a\":1}".into(),
                    id: Some("7".into()),
                    retry: None
                },
                data("one\ntwo"),
                SseEvent {
                    id: Some(String::new()),
                    retry: Some(3000),
                    ..SseEvent::default()
                },
                data("cr"),
            ]
        );
    }

    #[test]
    fn an_event_split_anywhere_is_the_same_event() {
        let whole: &[u8] = b"\xEF\xBB\xBFid: 1\r\ndata: hello\r\ndata: world\r\n\r\n";
        for cut in 0..whole.len() {
            let (a, b) = whole.split_at(cut);
            let events = parse(&[a, b], 1024).unwrap();
            assert_eq!(
                events,
                [SseEvent {
                    id: Some("1".into()),
                    ..data("hello\nworld")
                }],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_line_ending_in_cr_at_a_chunk_end_is_ended_once() {
        // CR, then an empty chunk, then LF: one line end, not two (no early dispatch).
        let events = parse(&[b"data: a\r", b"", b"\ndata: b\n\n"], 64).unwrap();
        assert_eq!(events, [data("a\nb")]);
        // CR, then CR in the next chunk: a line end and an empty line.
        let events = parse(&[b"data: a\r", b"\rdata: b\n\n"], 64).unwrap();
        assert_eq!(events, [data("a"), data("b")]);
    }

    #[test]
    fn an_id_only_event_is_kept_and_an_unfinished_one_is_not() {
        let events = parse(&[b"id: prime\ndata:\n\n", b"data: never finished"], 64).unwrap();
        assert_eq!(
            events,
            [SseEvent {
                id: Some("prime".into()),
                ..data("")
            }]
        );
    }

    #[test]
    fn the_cap_is_per_event_not_per_stream() {
        // 100 events of 40 bytes each pass a 64-byte cap.
        let one = b"data: 0123456789012345678901234567890123\n\n";
        let many: Vec<&[u8]> = (0..100).map(|_| &one[..]).collect();
        assert_eq!(parse(&many, 64).unwrap().len(), 100);
        // One event of three 30-byte lines does not, even split into small chunks.
        let big = b"data: 012345678901234567890123\ndata: 012345678901234567890123\ndata: 012345678901234567890123\n\n";
        let chunks: Vec<&[u8]> = big.chunks(7).collect();
        assert_eq!(parse(&chunks, 64), Err(EventTooLarge { cap: 64 }));
        // Nor does one endless line.
        assert_eq!(parse(&[&[b'x'; 100]], 64), Err(EventTooLarge { cap: 64 }));
    }
}
