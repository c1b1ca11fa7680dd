//! Finding a plan's instructions in a reply that is still arriving. The scanner looks for
//! the instruction array (after a `<think>` block, inside a fence or after prose: the
//! first `[` followed by `{`), then follows strings and nesting and hands out each
//! top-level object as soon as its closing brace arrives, read with the lenient reader.
//!
//! It only decides what may start early; the whole reply is compiled as usual at the end,
//! so a scanner that gives up (an object the reader cannot read, a shape it does not
//! know) costs speed, never correctness.

use serde_json::Value;

/// One instruction that has arrived.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrived {
    /// Its position in the array (0 for the first).
    pub index: usize,
    /// Its byte range in the reply.
    pub span: std::ops::Range<usize>,
    pub value: Value,
}

/// Where the scanner is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Looking for the array.
    Before,
    /// Inside the array, between or inside instructions.
    Array,
    /// The array ended, or the scanner gave up.
    Done,
}

#[derive(Debug)]
pub struct Scanner {
    text: String,
    state: State,
    /// Next byte to look at.
    pos: usize,
    /// Nesting below the array (1: directly inside it).
    depth: u32,
    /// The quote of the string being read, if any.
    quote: Option<u8>,
    escaped: bool,
    /// Start of the instruction being read.
    start: usize,
    index: usize,
    /// A leading think block (if any) is behind: the array may start at `pos`.
    body: bool,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner {
            text: String::new(),
            state: State::Before,
            pos: 0,
            depth: 0,
            quote: None,
            escaped: false,
            start: 0,
            index: 0,
            body: false,
        }
    }
}

impl Scanner {
    /// The reply so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the array has ended (or the scanner gave up): nothing more will arrive.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Adds a piece of the reply; returns the instructions it completed, in order.
    pub fn push(&mut self, piece: &str) -> Vec<Arrived> {
        if self.state == State::Done {
            // Nothing more will come out: the rest is not kept.
            return Vec::new();
        }
        self.text.push_str(piece);
        let mut out = Vec::new();
        if self.state == State::Before {
            self.find_array();
        }
        while self.state == State::Array && self.pos < self.text.len() {
            let b = self.text.as_bytes()[self.pos];
            self.pos += 1;
            if let Some(q) = self.quote {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == q {
                    self.quote = None;
                }
                continue;
            }
            match b {
                b'"' | b'\'' => self.quote = Some(b),
                b'{' | b'[' => {
                    if self.depth == 1 && b == b'{' {
                        self.start = self.pos - 1;
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.state = State::Done;
                    } else if self.depth == 1 && b == b'}' {
                        match self.read(self.start..self.pos) {
                            Some(a) => out.push(a),
                            None => self.state = State::Done,
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Skips a leading `<think>` block, then finds `[` followed by `{`.
    fn find_array(&mut self) {
        const OPEN: &str = "<think>";
        const CLOSE: &str = "</think>";
        let text = self.text.as_str();
        if !self.body {
            let lead = text.trim_start();
            if lead.starts_with(OPEN) {
                // NB: from where the last look stopped (less the tag's length, which may
                // have been cut), so a long think block is scanned once.
                let look = self.pos.saturating_sub(CLOSE.len());
                let look = (look..=text.len())
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(text.len());
                match text[look..].find(CLOSE) {
                    Some(end) => self.pos = look + end + CLOSE.len(),
                    None => {
                        self.pos = text.len();
                        return;
                    }
                }
            } else if OPEN.starts_with(lead) {
                // Empty, or perhaps the start of a think block: wait for more.
                return;
            }
            self.body = true;
        }
        let b = text.as_bytes();
        let mut i = self.pos;
        while let Some(off) = text[i..].find('[') {
            let at = i + off;
            let next = b[at + 1..].iter().position(|c| !c.is_ascii_whitespace());
            match next {
                // The rest has not arrived yet: look again with the next piece.
                None => {
                    self.pos = at;
                    return;
                }
                Some(n) if b[at + 1 + n] == b'{' => {
                    self.state = State::Array;
                    self.pos = at + 1;
                    self.depth = 1;
                    return;
                }
                Some(_) => i = at + 1,
            }
        }
        self.pos = text.len();
    }

    fn read(&mut self, span: std::ops::Range<usize>) -> Option<Arrived> {
        let parsed = plan_syntax::read(&self.text[span.clone()]);
        if parsed.has_errors() {
            return None;
        }
        let value = parsed.value?.to_value();
        if !value.is_object() {
            return None;
        }
        let index = self.index;
        self.index += 1;
        Some(Arrived { index, span, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scan_in_pieces(text: &str, size: usize) -> (Vec<Value>, bool) {
        let mut s = Scanner::default();
        let mut got = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        for chunk in chars.chunks(size.max(1)) {
            let piece: String = chunk.iter().collect();
            got.extend(s.push(&piece).into_iter().map(|a| a.value));
        }
        (got, s.done())
    }

    #[test]
    fn instructions_arrive_whole_whatever_the_pieces() {
        let reply = "<think>maybe [1] or [{x}]</think>Sure, here it is [see below]:\n```json\n[\n {\"seq_no\": 0, \"type\": \"assign\", \"parameters\": {\"s\": \"a } ] { [ \\\" '\"}},\n {'seq_no': 1, 'type': 'reasoning', 'parameters': {'x': [1, {'y': 2}]}},\n]\n```\nDone.";
        for size in [1, 2, 3, 7, 1000] {
            let (got, done) = scan_in_pieces(reply, size);
            assert!(done, "size {size}");
            assert_eq!(
                got,
                [
                    json!({"seq_no": 0, "type": "assign", "parameters": {"s": "a } ] { [ \" '"}}),
                    json!({"seq_no": 1, "type": "reasoning", "parameters": {"x": [1, {"y": 2}]}}),
                ],
                "size {size}"
            );
        }
    }

    #[test]
    fn an_unreadable_instruction_stops_the_scan() {
        let (got, done) = scan_in_pieces("[{\"a\": 1}, {\"b\": }, {\"c\": 3}]", 4);
        assert_eq!(got, [json!({"a": 1})]);
        assert!(done);
    }

    #[test]
    fn no_array_means_nothing_arrives() {
        let (got, done) = scan_in_pieces("I cannot help with [that].", 3);
        assert!(got.is_empty());
        assert!(!done);
    }
}
