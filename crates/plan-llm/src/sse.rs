//! A decoder for server-sent events (the `text/event-stream` format of the WHATWG HTML
//! standard), as OpenAI-compatible servers stream completions: `data:` lines, an empty
//! line ends an event, lines starting with `:` are comments, other fields are ignored.
//!
//! Bytes arrive in chunks cut anywhere (inside a line, between `\r` and `\n`, inside a
//! UTF-8 sequence), so a line is kept as bytes until its end is seen. The caller caps the
//! total size; the decoder holds at most one event.

/// Splits a byte stream into the `data` of each event.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// The current line, not yet ended.
    line: Vec<u8>,
    /// The current event's data lines, joined by `\n`.
    data: String,
    /// Whether the event has a `data` field (an event of empty data still counts).
    has_data: bool,
    /// The last byte seen was `\r`: a `\n` right after it ends nothing more.
    after_cr: bool,
}

impl SseDecoder {
    /// Feeds one chunk; returns the data of each event it completed, in order.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &b in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, b == b'\r');
            match b {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    if let Some(data) = self.end_line() {
                        events.push(data);
                    }
                }
                _ => self.line.push(b),
            }
        }
        events
    }

    /// The end of the stream: an event the server did not end with an empty line is
    /// still passed on (the standard drops it; servers that forget the last newline exist).
    pub(crate) fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            self.end_line();
        }
        self.dispatch()
    }

    fn end_line(&mut self) -> Option<String> {
        if self.line.is_empty() {
            return self.dispatch();
        }
        let mut line = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        // A byte-order mark may open the stream.
        if let Some(rest) = line.strip_prefix('\u{feff}') {
            line = rest.to_owned();
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        // An empty field name is a comment (`: keep-alive`).
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        None
    }

    fn dispatch(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(std::mem::take(&mut self.data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        let mut d = SseDecoder::default();
        let mut out: Vec<String> = chunks.iter().flat_map(|c| d.push(c)).collect();
        out.extend(d.finish());
        out
    }

    #[test]
    fn events_fields_comments_and_line_ends() {
        let stream = b": keep-alive\r\n\r\ndata: {\"a\":1}\n\nevent: x\nid: 7\ndata:two\ndata: lines\r\rdata\n\ndata: [DONE]\n\n";
        assert_eq!(decode(&[stream]), ["{\"a\":1}", "two\nlines", "", "[DONE]"]);
        assert_eq!(decode(&[b"data: last"]), ["last"], "no final newline");
        assert!(decode(&[b"\n\n: only a comment\n\n"]).is_empty());
        assert_eq!(decode(&[b"data: caf\xc3", b"\xa9\n\n"]), ["café"]);
    }

    proptest! {
        /// However the bytes are cut, the events are the same.
        #[test]
        fn chunking_does_not_matter(cuts in proptest::collection::vec(0usize..120, 0..12)) {
            let stream: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"h\xc3\xa9\"}}]}\r\n\r\n: c\n\ndata: a\ndata: b\r\rdata: [DONE]\n\n";
            let whole = decode(&[stream]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(stream.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for c in cuts {
                chunks.push(&stream[at..c]);
                at = c;
            }
            chunks.push(&stream[at..]);
            prop_assert_eq!(decode(&chunks), whole);
        }
    }
}
