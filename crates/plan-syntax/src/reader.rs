//! The lenient JSON reader: strict JSON plus the repairs LLM output needs, each reported as
//! a warning (`W00xx`) with its location.
//!
//! Shape: [`read`] first decides *where* the JSON is (the whole input; after a `<think>`
//! block or inside `<answer>`; inside a Markdown fence; or the first bracket in prose), then
//! one recursive-descent [`Reader`] parses a value from that byte offset of the ORIGINAL
//! source, so every span is an offset into what the user gave us, never into a copy.
//!
//! Performance: the reader scans bytes (`&[u8]`), copies a string's text only once (straight
//! into its node), and never allocates per character. It is safe to
//! slice `&str` at the bytes it stops on because they are all ASCII, and ASCII bytes never
//! occur inside a multi-byte UTF-8 sequence.

use std::borrow::Cow;

use crate::codes;
use crate::diag::{Diagnostic, Parsed};
use crate::json::{Member, Node, NodeKind, common_key};
use crate::limits;
use crate::span::Span;

/// Takes the elements of a top-level array as they are read, instead of the tree keeping
/// them: the plan builder makes each instruction as soon as its node is complete, so the
/// tree of a large plan is never whole beside its AST (the tree is several times the
/// size of the source).
pub(crate) trait Elements {
    /// An element of the top-level array, complete; `Some` gives it back to the tree.
    fn element(&mut self, node: Node) -> Option<Node>;
}

/// Keeps every element in the tree.
impl Elements for () {
    fn element(&mut self, node: Node) -> Option<Node> {
        Some(node)
    }
}

/// Reads `src` leniently. See the crate docs for the accepted forms.
pub(crate) fn read(src: &str) -> Parsed<Option<Node>> {
    read_with::<()>(src).0
}

/// [`read`], the top-level array's elements handed to an `E` as they are read; the `E` of
/// the reading that was kept is returned with it.
pub(crate) fn read_with<E: Elements + Default>(src: &str) -> (Parsed<Option<Node>>, E) {
    if src.len() > limits::MAX_SOURCE_BYTES {
        let d = Diagnostic::error(
            codes::TOO_LARGE,
            format!(
                "input is {} bytes; the limit is {} bytes (16 MiB)",
                src.len(),
                limits::MAX_SOURCE_BYTES
            ),
        )
        .with_span(Span::new(0, 0))
        .with_help("a plan is a few kilobytes of JSON: send only the instruction array");
        let parsed = Parsed {
            value: None,
            diagnostics: vec![d],
        };
        return (parsed, E::default());
    }
    let mut diags = Vec::new();
    let b = src.as_bytes();
    let mut lo = if src.starts_with('\u{feff}') { 3 } else { 0 };
    let mut hi = src.len();

    let first = skip_plain_ws(b, lo, hi);
    // A bare scalar (`42`, `"x"`, `None`) is a JSON document too; accept it only when it is
    // the whole input, so prose that happens to start with a digit or a word is not misread.
    if first < hi
        && matches!(b[first], b'"' | b'\'' | b'-' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
    {
        let att = attempt::<E>(src, first, hi);
        if att.clean() && skip_plain_ws(b, att.end, hi) >= hi {
            let parsed = Parsed {
                value: att.node,
                diagnostics: att.diags,
            };
            return (parsed, att.elements);
        }
    }
    if !starts_json_document(b, first, hi) {
        strip_wrappers(src, &mut lo, &mut hi, &mut diags);
    }
    let first = skip_plain_ws(b, lo, hi);
    let (value, elements) = if starts_json_document(b, first, hi) {
        direct(src, first, hi, &mut diags)
    } else {
        prose(src, lo, hi, &mut diags)
    };
    let parsed = Parsed {
        value,
        diagnostics: diags,
    };
    (parsed, elements)
}

/// The input starts with the JSON itself (possibly after a comment): parse it, and treat
/// anything after the value as ignored prose. No fallback to other candidates here: a
/// broken plan must be reported as broken, not replaced by some inner object that parses.
fn direct<E: Elements + Default>(
    src: &str,
    start: usize,
    hi: usize,
    diags: &mut Vec<Diagnostic>,
) -> (Option<Node>, E) {
    let att = attempt::<E>(src, start, hi);
    if att.node.is_none() && !att.committed() {
        // `[Note] here is the plan: ```json ...```` starts with a bracket but is prose. Only a
        // fenced block that parses cleanly may replace the direct reading: anything looser
        // could swap a broken plan for some inner value that happens to parse.
        if let Found::Clean(att, found) = fences::<E>(src, start, hi, &mut 0) {
            diags.extend(found);
            return (att.node, att.elements);
        }
    }
    diags.extend(att.diags);
    let Some(node) = att.node else {
        return (None, E::default());
    };
    let after = skip_plain_ws(src.as_bytes(), att.end, hi);
    if after < hi && !att.fatal {
        diags.push(prose_after(src, after, hi));
    }
    (Some(node), att.elements)
}

/// The input does not start with `[`/`{`: look for a fenced block, then for the first
/// bracket that starts a value that parses.
fn prose<E: Elements + Default>(
    src: &str,
    lo: usize,
    hi: usize,
    diags: &mut Vec<Diagnostic>,
) -> (Option<Node>, E) {
    let b = src.as_bytes();
    let first = skip_plain_ws(b, lo, hi);
    if first >= hi {
        diags.push(no_json(Span::new(first, first)));
        return (None, E::default());
    }

    let mut tries = 0usize;
    let mut committed: Option<Attempt<E>> = None;

    match fences::<E>(src, lo, hi, &mut tries) {
        Found::Clean(att, found) => {
            diags.extend(found);
            return (att.node, att.elements);
        }
        Found::Committed(att) => committed = Some(att),
        Found::Nothing => {}
    }

    // The first bracket that starts a value that parses.
    let mut p = lo;
    while committed.is_none() && tries < limits::MAX_CANDIDATES {
        let Some(q) = (p..hi).find(|&i| matches!(b[i], b'[' | b'{')) else {
            break;
        };
        tries += 1;
        let att = attempt::<E>(src, q, hi);
        if att.clean() {
            let before = skip_plain_ws(b, lo, q);
            diags.push(
                Diagnostic::warning(
                    codes::PROSE_BEFORE,
                    "the text before the JSON value was ignored",
                )
                .with_span(Span::new(before, trim_end(b, before, q)))
                .with_help("reply with only the JSON array of instructions, without commentary"),
            );
            let after = skip_plain_ws(b, att.end, hi);
            diags.extend(att.diags);
            if after < hi {
                diags.push(prose_after(src, after, hi));
            }
            return (att.node, att.elements);
        }
        if att.committed() {
            committed = Some(att);
            break;
        }
        p = q + 1;
    }

    match committed {
        Some(att) => {
            diags.extend(att.diags);
            (att.node, att.elements)
        }
        None => {
            diags.push(no_json(Span::new(
                first,
                trim_end(b, first, line_end(b, first, hi)),
            )));
            (None, E::default())
        }
    }
}

/// What the search of Markdown fences found.
enum Found<E> {
    /// A fenced value that parses without error, with its diagnostics (fence warning first).
    Clean(Attempt<E>, Vec<Diagnostic>),
    /// A fenced value that clearly is the JSON but has errors.
    Committed(Attempt<E>),
    Nothing,
}

/// The first fenced block in `lo..hi` whose content parses. The value is parsed from the
/// fence's content with no end bound at the closing fence, so a string that itself contains
/// ``` does not cut the plan short.
fn fences<E: Elements + Default>(src: &str, lo: usize, hi: usize, tries: &mut usize) -> Found<E> {
    let b = src.as_bytes();
    let mut search = lo;
    while *tries < limits::MAX_CANDIDATES {
        let Some((open, marker)) = find_fence(b, search, hi) else {
            break;
        };
        let content = fence_content_start(b, open + 3, hi);
        let start = skip_plain_ws(b, content, hi);
        let mut resume = content;
        if start < hi && matches!(b[start], b'[' | b'{' | b'/') {
            *tries += 1;
            let mut att = attempt::<E>(src, start, hi);
            resume = resume.max(att.end);
            if att.clean() {
                let opener = Span::new(open, trim_end(b, open, content));
                let after = skip_plain_ws(b, att.end, hi);
                let after = if b[after..hi].starts_with(marker) {
                    after + 3
                } else {
                    after
                };
                let has_prose = has_text(b, lo, open) || has_text(b, after, hi);
                let fence = if marker == b"~~~" { " (~~~)" } else { "" };
                let msg = if has_prose {
                    format!(
                        "the JSON was taken out of a Markdown code fence{fence}; the text around it was ignored"
                    )
                } else {
                    format!("the JSON was taken out of a Markdown code fence{fence}")
                };
                let mut found = vec![
                    Diagnostic::warning(codes::CODE_FENCE, msg)
                        .with_span(opener)
                        .with_help("reply with only the JSON array of instructions: no ``` fence, no commentary"),
                ];
                found.append(&mut att.diags);
                return Found::Clean(att, found);
            }
            if att.committed() {
                return Found::Committed(att);
            }
        }
        // Skip the closing fence of this block so it is not taken for an opener.
        search = match find(b, marker, resume, hi) {
            Some(close) => close + 3,
            None => break,
        };
    }

    Found::Nothing
}

/// The next Markdown fence opener in `b[from..to]`: ```` ``` ```` or `~~~` (CommonMark
/// allows both, and some models write the second), whichever comes first, with its marker
/// (a block is closed by the same marker).
fn find_fence(b: &[u8], from: usize, to: usize) -> Option<(usize, &'static [u8])> {
    const BACKTICKS: &[u8] = b"```";
    const TILDES: &[u8] = b"~~~";
    let ticks = find(b, BACKTICKS, from, to);
    // NB: the tilde search stops at the first backtick fence: no rescan of the rest.
    let tildes = find(b, TILDES, from, ticks.unwrap_or(to));
    match (ticks, tildes) {
        (_, Some(t)) => Some((t, TILDES)),
        (Some(t), None) => Some((t, BACKTICKS)),
        (None, None) => None,
    }
}

#[cold]
fn no_json(span: Span) -> Diagnostic {
    Diagnostic::error(codes::NO_JSON, "no JSON array or object found in the input")
        .with_span(span)
        .with_help(
            "reply with the plan as a JSON array of instructions, e.g. \
             [{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {...}}, ...]",
        )
}

#[cold]
fn prose_after(src: &str, after: usize, hi: usize) -> Diagnostic {
    Diagnostic::warning(
        codes::PROSE_AFTER,
        "the text after the JSON value was ignored",
    )
    .with_span(Span::new(after, trim_end(src.as_bytes(), after, hi)))
    .with_help("reply with only the JSON array of instructions, without commentary after it")
}

/// `<think>…</think>` is dropped; `<answer>…</answer>` narrows the input to its content.
fn strip_wrappers(src: &str, lo: &mut usize, hi: &mut usize, diags: &mut Vec<Diagnostic>) {
    let b = src.as_bytes();
    const THINK_OPEN: &[u8] = b"<think>";
    const THINK_CLOSE: &[u8] = b"</think>";
    if let Some(close) = find(b, THINK_CLOSE, *lo, *hi) {
        // Some models omit the opening tag; the block then starts at the input's start.
        let open = find(b, THINK_OPEN, *lo, close).unwrap_or(*lo);
        let end = close + THINK_CLOSE.len();
        diags.push(
            Diagnostic::warning(codes::THINK_BLOCK, "the `<think>` block was removed")
                .with_span(Span::new(open, end))
                .with_help(
                    "reply with only the JSON array of instructions, without the reasoning block",
                ),
        );
        *lo = end;
    } else {
        let first = skip_plain_ws(b, *lo, *hi);
        if b[first..*hi].starts_with(THINK_OPEN) {
            // An unfinished reasoning block: everything is reasoning, nothing is the plan.
            diags.push(
                Diagnostic::warning(
                    codes::THINK_BLOCK,
                    "the `<think>` block was removed (it is never closed)",
                )
                .with_span(Span::new(first, first + THINK_OPEN.len()))
                .with_help("close the reasoning with `</think>` and put the JSON plan after it"),
            );
            *lo = *hi;
            return;
        }
    }
    const ANSWER_OPEN: &[u8] = b"<answer>";
    const ANSWER_CLOSE: &[u8] = b"</answer>";
    if let Some(open) = find(b, ANSWER_OPEN, *lo, *hi) {
        let content = open + ANSWER_OPEN.len();
        let close = find(b, ANSWER_CLOSE, content, *hi);
        let end = close.map_or(content, |c| c + ANSWER_CLOSE.len());
        let mut d = Diagnostic::warning(
            codes::ANSWER_WRAPPER,
            "the JSON was taken out of an `<answer>` wrapper",
        )
        .with_span(Span::new(open, content))
        .with_help("reply with only the JSON array of instructions, without `<answer>` tags");
        if let Some(c) = close {
            d = d.with_label(Span::new(c, end), "wrapper closed here");
        }
        diags.push(d);
        *lo = content;
        if let Some(c) = close {
            *hi = c;
        }
    }
}

/// One parse of a value starting at a given offset.
struct Attempt<E> {
    node: Option<Node>,
    /// The top-level array's elements, if it had any.
    elements: E,
    diags: Vec<Diagnostic>,
    /// Offset just after the value (or where parsing stopped).
    end: usize,
    /// Elements and members completed: how far the parse got into something JSON-like.
    progress: usize,
    /// Parsing stopped at an error.
    fatal: bool,
}

impl<E> Attempt<E> {
    fn clean(&self) -> bool {
        self.node.is_some() && !self.diags.iter().any(Diagnostic::is_error)
    }

    /// A failed attempt that still clearly was the JSON (it got past its first element, or
    /// it failed in a way prose does not: too deep, or cut off at the end). Its errors are
    /// reported instead of looking for another candidate.
    fn committed(&self) -> bool {
        self.progress > 0
            || self
                .diags
                .iter()
                .any(|d| d.code == codes::TOO_DEEP || d.code == codes::UNEXPECTED_EOF)
    }
}

fn attempt<E: Elements + Default>(src: &str, start: usize, hi: usize) -> Attempt<E> {
    let mut elements = E::default();
    let mut r = Reader {
        text: src,
        b: src.as_bytes(),
        pos: start,
        end: hi,
        depth: 0,
        errors: 0,
        progress: 0,
        diags: Vec::new(),
        items: Vec::new(),
        members: Vec::new(),
        elements: &mut elements,
    };
    r.skip_ws();
    let mut node = Node {
        span: Span::new(start, start),
        kind: NodeKind::Null,
    };
    let node = r.value(&mut node).ok().map(|()| node);
    let fatal = node.is_none();
    if !fatal {
        r.skip_ws();
    }
    let (diags, end, progress) = (r.diags, r.pos, r.progress);
    Attempt {
        node,
        elements,
        diags,
        end,
        progress,
        fatal,
    }
}

/// An error has been recorded and parsing cannot go on.
struct Stop;
type R<T> = Result<T, Stop>;

/// How the elements of one kind of container are separated and closed.
struct Container {
    close: u8,
    /// "expected `,` or `]` after array element"
    expected: &'static str,
    /// Help for a missing separator.
    missing_help: &'static str,
    /// Help for anything else.
    other_help: &'static str,
    /// Label of the opening bracket in an end-of-input error.
    opened_label: &'static str,
    /// Bytes that most likely start the next element after a forgotten comma: reported,
    /// then read on.
    resumes: fn(u8) -> bool,
}

const ARRAY: Container = Container {
    close: b']',
    expected: "expected `,` or `]` after array element",
    missing_help: "separate array elements with `,`",
    other_help: "separate array elements with `,` and close the array with `]`",
    opened_label: "array starts here",
    resumes: starts_value,
};

const OBJECT: Container = Container {
    close: b'}',
    expected: "expected `,` or `}` after object member",
    missing_help: "separate object members with `,`",
    other_help: "separate object members with `,` and close the object with `}`",
    opened_label: "object starts here",
    resumes: |c| c == b'"' || c == b'\'',
};

struct Reader<'a, 'e> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    /// Exclusive bound (the end of the source, or of an `<answer>` wrapper).
    end: usize,
    depth: usize,
    errors: usize,
    progress: usize,
    diags: Vec<Diagnostic>,
    /// The elements and members of the arrays and objects being read, innermost last:
    /// each container takes its own off the top when it closes, in a vector of exactly
    /// their number. Growing each container's own vector instead left most of them with
    /// unused room (4 members allocated for an instruction's 3, for a parameter object's
    /// 1), a third of the tree's memory on a large plan.
    items: Vec<Node>,
    members: Vec<Member>,
    /// Takes the top-level array's elements.
    elements: &'e mut dyn Elements,
}

/// Bytes that may start a value: used to recover from a missing `,` or `:`.
fn starts_value(c: u8) -> bool {
    matches!(c, b'"' | b'\'' | b'{' | b'[' | b'-' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
}

impl Reader<'_, '_> {
    fn peek(&self) -> Option<u8> {
        if self.pos < self.end {
            Some(self.b[self.pos])
        } else {
            None
        }
    }

    /// Span of what `found` names: the word or character at `pos` (empty at the end).
    fn here(&self) -> Span {
        Span::new(self.pos, self.found_end())
    }

    fn char_end(&self, at: usize) -> usize {
        if at >= self.end {
            return at;
        }
        let mut e = at + 1;
        while e < self.end && !self.text.is_char_boundary(e) {
            e += 1;
        }
        e
    }

    /// End of the offending token at `pos`: a whole word (`seq_no`) reads better than its
    /// first letter; otherwise one character.
    fn found_end(&self) -> usize {
        let mut end = self.char_end(self.pos);
        if self.b.get(self.pos).is_some_and(u8::is_ascii_alphabetic) {
            while end < self.end
                && end - self.pos < 40
                && (self.b[end].is_ascii_alphanumeric() || self.b[end] == b'_')
            {
                end += 1;
            }
        }
        end
    }

    fn found(&self) -> String {
        match self.text.get(self.pos..self.found_end()) {
            Some(s) if !s.is_empty() => format!("found `{}`", s.escape_debug()),
            _ => "found end of input".to_owned(),
        }
    }

    fn warn(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// Records an error that parsing can continue past.
    fn error(&mut self, d: Diagnostic) -> R<()> {
        self.diags.push(d);
        self.errors += 1;
        if self.errors >= limits::MAX_READ_ERRORS {
            Err(Stop)
        } else {
            Ok(())
        }
    }

    /// Records an error that ends the parse.
    #[cold]
    fn fatal<T>(&mut self, d: Diagnostic) -> R<T> {
        self.diags.push(d);
        self.errors += 1;
        Err(Stop)
    }

    #[cold]
    fn eof<T>(&mut self, expected: &str, opened: Option<(Span, &str)>) -> R<T> {
        let mut d = Diagnostic::error(
            codes::UNEXPECTED_EOF,
            format!("unexpected end of input: {expected}"),
        )
        .with_span(Span::new(self.end, self.end))
        .with_help("the plan looks cut off: finish it and close every open string, `[` and `{`");
        if let Some((span, what)) = opened {
            d = d.with_label(span, what);
        }
        self.fatal(d)
    }

    #[cold]
    fn unexpected<T>(&mut self, expected: &str, help: &str) -> R<T> {
        let d = Diagnostic::error(codes::SYNTAX, format!("{expected}, {}", self.found()))
            .with_span(self.here())
            .with_help(help);
        self.fatal(d)
    }

    /// Skips whitespace and comments (each comment is a repair warning).
    fn skip_ws(&mut self) {
        loop {
            while self.pos < self.end && matches!(self.b[self.pos], b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            }
            if self.pos + 1 >= self.end || self.b[self.pos] != b'/' {
                return;
            }
            let start = self.pos;
            match self.b[self.pos + 1] {
                b'/' => {
                    self.pos = line_end(self.b, start, self.end);
                }
                b'*' => match find(self.b, b"*/", start + 2, self.end) {
                    Some(close) => self.pos = close + 2,
                    None => {
                        self.pos = self.end;
                        self.diags.push(
                            Diagnostic::error(codes::UNTERMINATED_COMMENT, "block comment is never closed")
                                .with_span(Span::new(start, start + 2))
                                .with_help("close the comment with `*/`, or better, remove comments: JSON has none"),
                        );
                        self.errors += 1;
                        return;
                    }
                },
                _ => return,
            }
            self.warn(
                Diagnostic::warning(codes::COMMENT, "comment ignored (JSON has no comments)")
                    .with_span(Span::new(start, trim_end(self.b, start, self.pos)))
                    .with_help(
                        "remove the comment; put explanations in the `reasoning` instruction",
                    ),
            );
        }
    }

    /// Reads a value into `out`: building the node in place instead of returning it
    /// spares moving every node through each level's `Result`, which was the reader's
    /// hottest code. Nothing of `out` is kept when this fails.
    fn value(&mut self, out: &mut Node) -> R<()> {
        let Some(c) = self.peek() else {
            return self.eof("expected a value", None);
        };
        match c {
            b'[' => self.array(out),
            b'{' => self.object(out),
            b'"' | b'\'' => {
                let mut s = String::new();
                out.span = self.string(c, &mut s)?;
                out.kind = NodeKind::String(s);
                Ok(())
            }
            b'-' | b'0'..=b'9' => {
                *out = self.number()?;
                Ok(())
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                *out = self.word()?;
                Ok(())
            }
            _ => self.unexpected(
                "expected a value",
                "a value is a string in double quotes, a number, true, false, null, an array or an object",
            ),
        }
    }

    fn enter(&mut self, start: usize) -> R<()> {
        self.depth += 1;
        if self.depth > limits::MAX_NESTING {
            return self.fatal(
                Diagnostic::error(
                    codes::TOO_DEEP,
                    format!(
                        "arrays and objects are nested deeper than {} levels",
                        limits::MAX_NESTING
                    ),
                )
                .with_span(Span::new(start, start + 1))
                .with_help("flatten the structure: a plan needs only a few levels of nesting"),
            );
        }
        Ok(())
    }

    fn array(&mut self, out: &mut Node) -> R<()> {
        let start = self.pos;
        self.enter(start)?;
        self.pos += 1;
        let opened = Span::new(start, start + 1);
        let base = self.items.len();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                let mut item = Node {
                    span: Span::new(self.pos, self.pos),
                    kind: NodeKind::Null,
                };
                self.value(&mut item)?;
                // NB: `depth` is back to this array's: 1 for a top-level one.
                if self.depth > 1 {
                    self.items.push(item);
                } else if let Some(item) = self.elements.element(item) {
                    self.items.push(item);
                }
                self.progress += 1;
                self.skip_ws();
                if self.separator(&ARRAY, opened)? {
                    break;
                }
            }
        }
        self.depth -= 1;
        out.span = Span::new(start, self.pos);
        out.kind = NodeKind::Array(self.items.drain(base..).collect());
        Ok(())
    }

    fn object(&mut self, out: &mut Node) -> R<()> {
        let start = self.pos;
        self.enter(start)?;
        self.pos += 1;
        let opened = Span::new(start, start + 1);
        let base = self.members.len();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                let (key, key_span) = match self.peek() {
                    Some(q @ (b'"' | b'\'')) => self.key(q)?,
                    Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => self.bare_key(),
                    None => {
                        return self.eof(
                            "expected a string key",
                            Some((opened, "object starts here")),
                        );
                    }
                    Some(_) => {
                        return self.unexpected(
                            "expected a string key",
                            "object keys are strings in double quotes: {\"key\": value}",
                        );
                    }
                };
                self.skip_ws();
                match self.peek() {
                    Some(b':') => self.pos += 1,
                    None => {
                        return self.eof(
                            "expected `:` after object key",
                            Some((opened, "object starts here")),
                        );
                    }
                    Some(c) if starts_value(c) => {
                        let d = Diagnostic::error(
                            codes::SYNTAX,
                            format!("expected `:` after object key, {}", self.found()),
                        )
                        .with_span(self.here())
                        .with_help("write each member as \"key\": value");
                        self.error(d)?;
                    }
                    Some(_) => {
                        return self.unexpected(
                            "expected `:` after object key",
                            "write each member as \"key\": value",
                        );
                    }
                }
                self.skip_ws();
                let mut value = Node {
                    span: Span::new(self.pos, self.pos),
                    kind: NodeKind::Null,
                };
                self.value(&mut value)?;
                self.members.push(Member {
                    key,
                    key_span,
                    value,
                });
                self.progress += 1;
                self.skip_ws();
                if self.separator(&OBJECT, opened)? {
                    break;
                }
            }
        }
        self.depth -= 1;
        let members: Vec<Member> = self.members.drain(base..).collect();
        self.check_duplicates(&members);
        out.span = Span::new(start, self.pos);
        out.kind = NodeKind::Object(members);
        Ok(())
    }

    /// Reads what follows an element of `c`: a `,` (and a trailing comma before the close,
    /// as a repair), or the closing bracket. Returns whether the container is closed.
    fn separator(&mut self, c: &Container, opened: Span) -> R<bool> {
        match self.peek() {
            Some(b',') => {
                let comma = self.pos;
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(c.close) {
                    self.trailing_comma(comma);
                    self.pos += 1;
                    return Ok(true);
                }
                Ok(false)
            }
            Some(b) if b == c.close => {
                self.pos += 1;
                Ok(true)
            }
            None => self.eof(c.expected, Some((opened, c.opened_label))),
            Some(b) if (c.resumes)(b) => {
                let d =
                    Diagnostic::error(codes::SYNTAX, format!("{}, {}", c.expected, self.found()))
                        .with_span(self.here())
                        .with_help(c.missing_help);
                self.error(d)?;
                Ok(false)
            }
            Some(_) => self.unexpected(c.expected, c.other_help),
        }
    }

    fn trailing_comma(&mut self, comma: usize) {
        self.warn(
            Diagnostic::warning(codes::TRAILING_COMMA, "trailing comma ignored")
                .with_span(Span::new(comma, comma + 1))
                .with_help("remove the `,` before the closing bracket"),
        );
    }

    fn check_duplicates(&mut self, members: &[Member]) {
        // Objects in plans are small: a quadratic scan beats hashing up to a few dozen keys.
        let dup = |i: usize| members[..i].iter().find(|m| m.key == members[i].key);
        if members.len() <= 32 {
            for (i, m) in members.iter().enumerate().skip(1) {
                if let Some(first) = dup(i) {
                    self.duplicate(first, m);
                }
            }
        } else {
            let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
            for (i, m) in members.iter().enumerate() {
                if let Some(&f) = seen.get(&*m.key) {
                    self.duplicate(&members[f], m);
                } else {
                    seen.insert(&m.key, i);
                }
            }
        }
    }

    #[cold]
    fn duplicate(&mut self, first: &Member, again: &Member) {
        self.warn(
            Diagnostic::warning(
                codes::DUPLICATE_KEY,
                format!(
                    "duplicate key `{}`: the last value is used",
                    again.key.escape_debug()
                ),
            )
            .with_span(again.key_span)
            .with_label(first.key_span, "first written here")
            .with_help(format!(
                "keep only one `{}` member",
                again.key.escape_debug()
            )),
        );
    }

    /// An object key: a string, shared when it is one of the common keys (see `Member`).
    fn key(&mut self, quote: u8) -> R<(Cow<'static, str>, Span)> {
        let start = self.pos;
        let close = plain_run_end(self.b, start + 1, self.end, quote);
        if quote == b'"' && close < self.end && self.b.get(close) == Some(&quote) {
            // The usual key: double-quoted, no escapes. `string` would read the same text
            // and report nothing, so it is taken as is, without a copy when it is common.
            let text = &self.text[start + 1..close];
            self.pos = close + 1;
            let key = match common_key(text) {
                Some(k) => Cow::Borrowed(k),
                None => Cow::Owned(text.to_owned()),
            };
            return Ok((key, Span::new(start, self.pos)));
        }
        let mut key = String::new();
        let span = self.string(quote, &mut key)?;
        let key = match common_key(&key) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(key),
        };
        Ok((key, span))
    }

    /// `{seq_no: 0}`: an unquoted (JavaScript-style) key, an identifier of ASCII letters,
    /// digits, `_` and `$`, read as the string it spells, as a repair.
    fn bare_key(&mut self) -> (Cow<'static, str>, Span) {
        let start = self.pos;
        while self.pos < self.end
            && (self.b[self.pos].is_ascii_alphanumeric() || matches!(self.b[self.pos], b'_' | b'$'))
        {
            self.pos += 1;
        }
        let span = Span::new(start, self.pos);
        let text = &self.text[start..self.pos];
        self.warn(
            Diagnostic::warning(
                codes::UNQUOTED_KEY,
                format!("unquoted object key `{text}` read as \"{text}\""),
            )
            .with_span(span)
            .with_help(format!("put the key in double quotes: \"{text}\"")),
        );
        let key = match common_key(text) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(text.to_owned()),
        };
        (key, span)
    }

    /// The backslash escape at the reader (in a `python` or a JSON string): its character
    /// appended to `out`, or its text as written when it is not one (an error, and the
    /// reading goes on).
    fn escape(&mut self, python: bool, out: &mut String) -> R<()> {
        let esc = self.pos;
        self.pos += 1;
        let Some(e) = self.peek() else {
            return Ok(());
        };
        self.pos += 1;
        let mut python_only = false;
        let decoded: Option<char> = match e {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'/' if !python => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            b'\'' => {
                python_only = true;
                Some('\'')
            }
            b'u' => self.unicode_escape(esc)?,
            b'x' => {
                python_only = true;
                self.hex(2).map(|v| char::from(v as u8))
            }
            b'U' => {
                python_only = true;
                self.hex(8).and_then(char::from_u32)
            }
            _ => None,
        };
        match decoded {
            Some(ch) => {
                out.push(ch);
                if python_only && !python {
                    let span = Span::new(esc, self.pos);
                    self.warn(
                        Diagnostic::warning(codes::PYTHON_ESCAPE, "escape sequence is Python, not JSON")
                            .with_span(span)
                            .with_help("in JSON write `'` without a backslash, and other characters as `\\uXXXX`"),
                    );
                }
            }
            None => {
                // Keep the text as written and go on: one bad escape should not hide
                // the rest of the plan's problems.
                let bad_end = self.char_end(esc + 1).max(self.pos);
                let bad = self.text.get(esc..bad_end).unwrap_or("\\");
                out.push_str(bad);
                self.pos = bad_end;
                let d = Diagnostic::error(codes::BAD_ESCAPE, format!("invalid escape `{}` in string", bad.escape_debug()))
                    .with_span(Span::new(esc, bad_end))
                    .with_help("valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX; write a literal backslash as \\\\");
                self.error(d)?;
            }
        }
        Ok(())
    }

    /// A string in `quote`s (`"` JSON, `'` Python): its value is appended to `out` (empty:
    /// the caller's final string, see `value`). Returns the string's span.
    fn string(&mut self, quote: u8, out: &mut String) -> R<Span> {
        let start = self.pos;
        self.pos += 1;
        let python = quote == b'\'';
        let mut seg = self.pos;
        let mut ctrl_warned = false;
        loop {
            self.pos = plain_run_end(self.b, self.pos, self.end, quote);
            let Some(c) = self.peek() else {
                return self.fatal(
                    Diagnostic::error(codes::UNTERMINATED_STRING, "string is never closed")
                        .with_span(Span::new(start, start + 1))
                        .with_help(format!("close the string with `{}`", quote as char)),
                );
            };
            if c == quote {
                // Without escapes this is the one copy of the text the string gets.
                out.push_str(&self.text[seg..self.pos]);
                self.pos += 1;
                let span = Span::new(start, self.pos);
                if python {
                    self.warn(
                        Diagnostic::warning(codes::SINGLE_QUOTED, "single-quoted (Python) string")
                            .with_span(span)
                            .with_help("JSON strings use double quotes: write \"...\" and escape inner `\"` as `\\\"`"),
                    );
                }
                return Ok(span);
            }
            if c < 0x20 {
                if !ctrl_warned {
                    ctrl_warned = true;
                    let what = match c {
                        b'\n' => "a raw line break",
                        b'\t' => "a raw tab",
                        _ => "a raw control character",
                    };
                    self.warn(
                        Diagnostic::warning(codes::CONTROL_CHAR, format!("string contains {what}"))
                            .with_span(Span::new(self.pos, self.pos + 1))
                            .with_help("escape control characters inside strings: write `\\n` for a line break, `\\t` for a tab"),
                    );
                }
                self.pos += 1;
                continue;
            }
            out.push_str(&self.text[seg..self.pos]);
            self.escape(python, out)?;
            seg = self.pos;
        }
    }

    /// Reads `n` hex digits at `pos`; `None` (consuming nothing) if they are not there.
    fn hex(&mut self, n: usize) -> Option<u32> {
        let digits = self
            .b
            .get(self.pos..self.pos.checked_add(n)?.min(self.end))?;
        if digits.len() != n {
            return None;
        }
        let mut v: u32 = 0;
        for &d in digits {
            v = (v << 4) | (d as char).to_digit(16)?;
        }
        self.pos += n;
        Some(v)
    }

    /// `\uXXXX` (after the `u`), combining a surrogate pair into one character. `Ok(None)`
    /// means invalid (the caller reports it).
    fn unicode_escape(&mut self, esc: usize) -> R<Option<char>> {
        let Some(hi) = self.hex(4) else {
            return Ok(None);
        };
        if (0xD800..0xDC00).contains(&hi) {
            let save = self.pos;
            if self.b.get(self.pos..self.pos + 2) == Some(b"\\u".as_slice())
                && self.pos + 2 <= self.end
            {
                self.pos += 2;
                if let Some(lo) = self.hex(4)
                    && (0xDC00..0xE000).contains(&lo)
                {
                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    return Ok(char::from_u32(c));
                }
            }
            self.pos = save;
            self.lone_surrogate(esc)?;
            return Ok(Some('\u{FFFD}'));
        }
        if (0xDC00..0xE000).contains(&hi) {
            self.lone_surrogate(esc)?;
            return Ok(Some('\u{FFFD}'));
        }
        Ok(char::from_u32(hi))
    }

    #[cold]
    fn lone_surrogate(&mut self, esc: usize) -> R<()> {
        let d = Diagnostic::error(
            codes::BAD_ESCAPE,
            "`\\u` escape is an unpaired UTF-16 surrogate",
        )
        .with_span(Span::new(esc, self.pos))
        .with_help("write the character itself, or a complete surrogate pair `\\uD83D\\uDE00`");
        self.error(d)
    }

    fn number(&mut self) -> R<Node> {
        let start = self.pos;
        let negative = self.b[self.pos] == b'-';
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        let digits = |r: &mut Self| {
            let s = r.pos;
            while r.pos < r.end && r.b[r.pos].is_ascii_digit() {
                r.pos += 1;
            }
            r.pos - s
        };
        if digits(self) == 0 {
            if matches!(self.peek(), Some(b'a'..=b'z' | b'A'..=b'Z')) {
                // `-Infinity`, `-NaN`
                let word = self.word()?;
                return Ok(Node {
                    span: Span::new(start, word.span.end as usize),
                    kind: NodeKind::Null,
                });
            }
            return self.unexpected(
                "expected digits after `-`",
                "write a number such as -1 or -0.5",
            );
        }
        let mut problem: Option<&str> = None;
        if self.b[int_start] == b'0' && self.pos - int_start > 1 {
            problem = Some("leading zeros are not allowed in JSON numbers");
        }
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            if digits(self) == 0 {
                problem.get_or_insert("expected digits after the decimal point");
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            is_float = true;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                problem.get_or_insert("expected digits in the exponent");
            }
        }
        let span = Span::new(start, self.pos);
        let text = &self.text[start..self.pos];
        if let Some(p) = problem {
            self.bad_number(span, format!("invalid number `{text}`: {p}"))?;
            return Ok(Node {
                span,
                kind: NodeKind::Null,
            });
        }
        let n = if is_float {
            None
        } else {
            int_number(text, negative)
        };
        let n = match n {
            Some(n) => n,
            // Floats, and integers beyond i64/u64 (as serde_json does).
            None => match text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Some(n) => n,
                None => {
                    self.bad_number(span, format!("number `{text}` is out of range"))?;
                    return Ok(Node {
                        span,
                        kind: NodeKind::Null,
                    });
                }
            },
        };
        Ok(Node {
            span,
            kind: NodeKind::Number(n),
        })
    }

    #[cold]
    fn bad_number(&mut self, span: Span, msg: String) -> R<()> {
        let d = Diagnostic::error(codes::BAD_NUMBER, msg)
            .with_span(span)
            .with_help(
                "write numbers as JSON does: 10, -3, 0.5, 1e3 (no leading zeros, NaN or Infinity)",
            );
        self.error(d)
    }

    /// `true`, `false`, `null`, their Python spellings, or an error.
    fn word(&mut self) -> R<Node> {
        let start = self.pos;
        while self.pos < self.end
            && (self.b[self.pos].is_ascii_alphanumeric() || self.b[self.pos] == b'_')
        {
            self.pos += 1;
        }
        let span = Span::new(start, self.pos);
        let (kind, python) = match &self.text[start..self.pos] {
            "true" => (NodeKind::Bool(true), false),
            "false" => (NodeKind::Bool(false), false),
            "null" => (NodeKind::Null, false),
            "True" => (NodeKind::Bool(true), true),
            "False" => (NodeKind::Bool(false), true),
            "None" => (NodeKind::Null, true),
            w @ ("NaN" | "Infinity" | "inf" | "nan") => {
                self.bad_number(span, format!("`{w}` is not a JSON number"))?;
                (NodeKind::Null, false)
            }
            w => {
                let w = w.to_owned();
                self.pos = start;
                let d = Diagnostic::error(codes::SYNTAX, format!("expected a value, found `{w}`"))
                    .with_span(span)
                    .with_help(
                        "strings must be in double quotes; the literals are true, false and null",
                    );
                return self.fatal(d);
            }
        };
        if python {
            let json = match kind {
                NodeKind::Bool(true) => "true",
                NodeKind::Bool(false) => "false",
                _ => "null",
            };
            self.warn(
                Diagnostic::warning(
                    codes::PYTHON_LITERAL,
                    format!(
                        "Python literal `{}` read as `{json}`",
                        &self.text[start..self.pos]
                    ),
                )
                .with_span(span)
                .with_help(format!("write `{json}`: JSON literals are lower case")),
            );
        }
        Ok(Node { span, kind })
    }
}

/// A JSON integer literal as serde_json reads it: u64 if non-negative, i64 if negative,
/// `-0` as the float -0.0; `None` when it does not fit (the caller makes it a float).
fn int_number(text: &str, negative: bool) -> Option<serde_json::Number> {
    if negative {
        let v: i64 = text.parse().ok()?;
        if v == 0 {
            return serde_json::Number::from_f64(-0.0);
        }
        Some(v.into())
    } else {
        let v: u64 = text.parse().ok()?;
        Some(v.into())
    }
}

/// The first offset in `pos..end` holding `quote`, a backslash or a control character (the
/// bytes a string scan must stop at), or `end`. Strings in plans are long prompts: eight
/// bytes are tested at once, each test exact per byte (no carry crosses bytes), so the
/// first hit is the lowest flagged byte.
fn plain_run_end(b: &[u8], mut pos: usize, end: usize, quote: u8) -> usize {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    // 0x80 in each byte of `x` that is zero.
    let zero = |x: u64| !(((x & LOW7) + LOW7) | x | LOW7);
    let end = end.min(b.len());
    while let Some(word) = pos
        .checked_add(8)
        .filter(|&e| e <= end)
        .and_then(|e| b.get(pos..e))
    {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let x = u64::from_le_bytes(bytes);
        let hits = zero(x ^ (ONES * u64::from(quote)))
            | zero(x ^ (ONES * u64::from(b'\\')))
            // A control character is a byte with none of its top three bits set.
            | zero(x & (ONES * 0xe0));
        if hits != 0 {
            return pos + (hits.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while pos < end {
        let c = b[pos];
        if c == quote || c == b'\\' || c < 0x20 {
            return pos;
        }
        pos += 1;
    }
    end
}

/// Does the document start here (a bracket, or a comment before one)?
fn starts_json_document(b: &[u8], at: usize, hi: usize) -> bool {
    matches!(
        b.get(at..hi),
        Some([b'[' | b'{', ..] | [b'/', b'/' | b'*', ..])
    )
}

fn skip_plain_ws(b: &[u8], mut i: usize, hi: usize) -> usize {
    while i < hi && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn trim_end(b: &[u8], lo: usize, mut hi: usize) -> usize {
    while hi > lo && b[hi - 1].is_ascii_whitespace() {
        hi -= 1;
    }
    hi
}

fn has_text(b: &[u8], lo: usize, hi: usize) -> bool {
    skip_plain_ws(b, lo, hi) < hi
}

/// Offset of the next `\n` at or after `i` (or `hi`).
fn line_end(b: &[u8], i: usize, hi: usize) -> usize {
    (i..hi).find(|&j| b[j] == b'\n').unwrap_or(hi)
}

/// After a fence's ```: skip the info string (`json`, `python`, ...) up to the line end.
fn fence_content_start(b: &[u8], i: usize, hi: usize) -> usize {
    let mut j = i;
    while j < hi && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'_' | b'-' | b'+' | b'.')) {
        j += 1;
    }
    while j < hi && matches!(b[j], b' ' | b'\t' | b'\r') {
        j += 1;
    }
    if j < hi && b[j] == b'\n' { j + 1 } else { j }
}

/// First occurrence of `needle` in `b[from..to]`, as an absolute offset.
fn find(b: &[u8], needle: &[u8], from: usize, to: usize) -> Option<usize> {
    let hay = b.get(from..to)?;
    let first = *needle.first()?;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        // Jump to the next candidate first byte, then compare the rest.
        match hay[i..].iter().position(|&c| c == first) {
            Some(k) => i += k,
            None => return None,
        }
        if hay.get(i..i + needle.len()) == Some(needle) {
            return Some(from + i);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::plain_run_end;

    /// The word-at-a-time scan stops exactly where a byte loop stops, for every byte value
    /// at every offset of a word, both quotes, and bounds inside the slice.
    #[test]
    fn plain_run_end_matches_a_byte_loop() {
        let naive = |b: &[u8], pos: usize, end: usize, q: u8| {
            (pos..end)
                .find(|&i| b[i] == q || b[i] == b'\\' || b[i] < 0x20)
                .unwrap_or(end)
        };
        for quote in [b'"', b'\''] {
            for filler in [b'a', b' ', 0x7f, 0x80, 0xe0, 0xff, b'"', b'\''] {
                for at in 0..20 {
                    for c in 0..=255u8 {
                        let mut b = vec![filler; 24];
                        b[at] = c;
                        for (pos, end) in [(0, 24), (1, 24), (0, 17), (3, 9), (5, 5)] {
                            assert_eq!(
                                plain_run_end(&b, pos, end, quote),
                                naive(&b, pos, end, quote),
                                "quote {quote} filler {filler} byte {c} at {at}, {pos}..{end}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod key_tests {
    use std::borrow::Cow;

    use crate::json::NodeKind;

    /// Common keys are shared whichever way they are written; other keys are owned; the
    /// text is the same either way.
    #[test]
    fn common_keys_are_shared() {
        let src = r#"{"seq_no": 1, "seq\u005fno": 2, 'type': 3, "counter": 4, "typ\"e": 5}"#;
        let node = super::read(src).value.expect("reads");
        let NodeKind::Object(members) = &node.kind else {
            panic!("object expected, got {node:?}");
        };
        let keys: Vec<(&str, bool)> = members
            .iter()
            .map(|m| (&*m.key, matches!(m.key, Cow::Borrowed(_))))
            .collect();
        assert_eq!(
            keys,
            [
                ("seq_no", true),
                ("seq_no", true),
                ("type", true),
                ("counter", false),
                ("typ\"e", false)
            ]
        );
    }
}
