//! `plan-render`: diagnostics → text, shared by the two CLIs (`planc`, `planvm`). This is
//! the only place plan diagnostics become bytes: the compiler hands back plain data
//! (`plan_syntax::Diagnostic`) and the CLI picks the format.
//!
//! - [`render_human`]: rustc-like, with the source snippet (codespan-reporting).
//! - [`render_json`]: one JSON object per line, for tools and for feeding back to an LLM.
//! - [`summary`]: the `plan.json: 2 errors, 1 warning` line.
//! - [`files`]: file identity, so that no output of a CLI overwrites one of its inputs.

pub mod files;

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor};
use plan_syntax::{Diagnostic, LineIndex, Severity, Span};
use std::ops::Range;

/// Renders `diags` about the file `file_name` (whose text is `src`) like rustc does:
/// `error[E0101]: message`, the source snippet with the primary span underlined,
/// secondary labels, and the help line as `= help: ...`.
///
/// `color` selects ANSI escapes; the caller decides (terminal and `NO_COLOR`).
pub fn render_human(file_name: &str, src: &str, diags: &[Diagnostic], color: bool) -> String {
    let file = SimpleFile::new(file_name, src);
    let config = term::Config::default();
    let mut buf = if color {
        termcolor::Buffer::ansi()
    } else {
        termcolor::Buffer::no_color()
    };
    for d in diags {
        let cs = to_codespan(src, d);
        if term::emit(&mut buf, &config, &file, &cs).is_err() {
            // NB: unreachable with clamped spans, but a renderer hiccup must not lose the
            // diagnostic itself: fall back to the one-line form.
            let line = format!("{}[{}]: {}\n\n", d.severity.as_str(), d.code, d.message);
            buf = append(buf, line.as_bytes());
        }
    }
    String::from_utf8_lossy(buf.as_slice()).into_owned()
}

fn append(mut buf: termcolor::Buffer, bytes: &[u8]) -> termcolor::Buffer {
    use std::io::Write;
    // Writing into an in-memory buffer cannot fail.
    let _ = buf.write_all(bytes);
    buf
}

fn to_codespan(src: &str, d: &Diagnostic) -> CsDiagnostic<()> {
    let severity = match d.severity {
        Severity::Error => CsSeverity::Error,
        Severity::Warning => CsSeverity::Warning,
    };
    let mut labels = Vec::with_capacity(1 + d.labels.len());
    if let Some(span) = d.span {
        labels.push(Label::primary((), clamp(src, span)));
    }
    for (span, text) in &d.labels {
        labels.push(Label::secondary((), clamp(src, *span)).with_message(text));
    }
    let mut notes = Vec::new();
    if d.span.is_none()
        && let Some(seq) = d.seq_no
    {
        // Without a snippet, the seq_no is the only way to find the instruction.
        notes.push(format!("in the instruction with seq_no {seq}"));
    }
    if let Some(help) = &d.help {
        notes.push(format!("help: {help}"));
    }
    CsDiagnostic::new(severity)
        .with_code(d.code)
        .with_message(&d.message)
        .with_labels(labels)
        .with_notes(notes)
}

/// Spans come from the compiler, but the renderer slices the source with them: keep them
/// inside the text and on char boundaries so a wrong span degrades the snippet, not the run.
fn clamp(src: &str, span: Span) -> Range<usize> {
    let fix = |mut i: usize| {
        i = i.min(src.len());
        while !src.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = fix(span.start as usize);
    let end = fix(span.end as usize).max(start);
    start..end
}

/// One JSON object per diagnostic and line, fields in this order: `file`, `severity`
/// (`"error"` | `"warning"`), `code`, `message`, `seq_no` (or null), `line`, `column`
/// (1-based; null without a span), `help` (or null).
pub fn render_json(file_name: &str, diags: &[Diagnostic], index: &LineIndex) -> String {
    let mut out = String::new();
    for d in diags {
        let (line, column) = match d.line_col(index) {
            Some((l, c)) => (Some(l), Some(c)),
            None => (None, None),
        };
        // NB: the workspace enables serde_json's `preserve_order`, so `json!` keeps the
        // field order written here; consumers may rely on it for readability only.
        let obj = serde_json::json!({
            "file": file_name,
            "severity": d.severity.as_str(),
            "code": d.code,
            "message": d.message,
            "seq_no": d.seq_no,
            "line": line,
            "column": column,
            "help": d.help,
        });
        out.push_str(&obj.to_string());
        out.push('\n');
    }
    out
}

/// Error and warning counts of one file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub errors: usize,
    pub warnings: usize,
}

impl Counts {
    pub fn of(diags: &[Diagnostic]) -> Self {
        let errors = diags.iter().filter(|d| d.is_error()).count();
        Counts {
            errors,
            warnings: diags.len() - errors,
        }
    }
}

/// `plan.json: 2 errors, 1 warning`. Under `--deny-warnings` the line says so when there
/// are warnings, so that exit code 1 next to "0 errors" is not a puzzle.
pub fn summary(file_name: &str, counts: Counts, deny_warnings: bool) -> String {
    fn plural(n: usize, word: &str) -> String {
        if n == 1 {
            format!("{n} {word}")
        } else {
            format!("{n} {word}s")
        }
    }
    let denied = if deny_warnings && counts.warnings > 0 {
        " (warnings denied)"
    } else {
        ""
    };
    format!(
        "{file_name}: {}, {}{denied}",
        plural(counts.errors, "error"),
        plural(counts.warnings, "warning")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "[\n  {\"seq_no\": 0, \"type\": \"calling\",\n   \"parameters\": {\"tool_name\": \"nope\"}}\n]\n";

    fn span_of(needle: &str) -> Span {
        let start = SRC.find(needle).expect("needle in SRC");
        Span::new(start, start + needle.len())
    }

    fn sample() -> Vec<Diagnostic> {
        vec![
            Diagnostic::error("E0301", "unknown tool `nope`")
                .with_span(span_of("\"nope\""))
                .with_seq(Some(0))
                .with_help("use one of: llm_generate, vector_search")
                .with_label(span_of("\"calling\""), "in this `calling` instruction"),
            Diagnostic::warning("W0101", "no path sets `final_answer`"),
            Diagnostic::warning("W0102", "instruction never runs").with_seq(Some(7)),
        ]
    }

    #[test]
    fn human_has_code_snippet_labels_and_help() {
        let out = render_human("plan.json", SRC, &sample(), false);
        let expected = r#"error[E0301]: unknown tool `nope`
  ┌─ plan.json:3:32
  │
2 │   {"seq_no": 0, "type": "calling",
  │                         --------- in this `calling` instruction
3 │    "parameters": {"tool_name": "nope"}}
  │                                ^^^^^^
  │
  = help: use one of: llm_generate, vector_search

warning[W0101]: no path sets `final_answer`

warning[W0102]: instruction never runs
 = in the instruction with seq_no 7

"#;
        assert_eq!(out, expected);
    }

    #[test]
    fn human_color_only_when_asked() {
        let plain = render_human("plan.json", SRC, &sample(), false);
        let colored = render_human("plan.json", SRC, &sample(), true);
        assert!(!plain.contains('\x1b'));
        assert!(colored.contains("\x1b["));
    }

    #[test]
    fn human_survives_bad_spans() {
        // Past the end, reversed, and inside a multi-byte char: clamped, never a panic.
        let src = "[\"é\"]";
        let diags = vec![
            Diagnostic::error("E1", "past end").with_span(Span { start: 90, end: 99 }),
            Diagnostic::error("E2", "reversed").with_span(Span { start: 3, end: 1 }),
            Diagnostic::error("E3", "mid char").with_span(Span { start: 3, end: 3 }),
        ];
        let out = render_human("x.json", src, &diags, false);
        for code in ["error[E1]", "error[E2]", "error[E3]"] {
            assert!(out.contains(code), "{code} missing in {out}");
        }
    }

    #[test]
    fn json_lines_have_exact_fields() {
        let index = LineIndex::new(SRC);
        let out = render_json("plan.json", &sample(), &index);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"file":"plan.json","severity":"error","code":"E0301","message":"unknown tool `nope`","seq_no":0,"line":3,"column":32,"help":"use one of: llm_generate, vector_search"}"#,
                r#"{"file":"plan.json","severity":"warning","code":"W0101","message":"no path sets `final_answer`","seq_no":null,"line":null,"column":null,"help":null}"#,
                r#"{"file":"plan.json","severity":"warning","code":"W0102","message":"instruction never runs","seq_no":7,"line":null,"column":null,"help":null}"#,
            ]
        );
    }

    #[test]
    fn json_escapes_and_counts_columns_in_chars() {
        let src = "[\"é\", \"x\"]";
        let start = src.find("\"x\"").expect("x");
        let d =
            Diagnostic::error("E9", "quote \" and\nnewline").with_span(Span::new(start, start + 3));
        let out = render_json("dir/ü.json", &[d], &LineIndex::new(src));
        let v: serde_json::Value = serde_json::from_str(out.trim_end()).expect("valid JSON");
        assert_eq!(v["message"], "quote \" and\nnewline");
        assert_eq!(v["file"], "dir/ü.json");
        // `é` is two bytes but one column.
        assert_eq!(
            (v["line"].as_u64(), v["column"].as_u64()),
            (Some(1), Some(7))
        );
        assert_eq!(out.matches('\n').count(), 1, "one line per diagnostic");
    }

    #[test]
    fn summary_pluralises() {
        let c = Counts::of(&sample());
        assert_eq!(
            c,
            Counts {
                errors: 1,
                warnings: 2
            }
        );
        assert_eq!(
            summary("plan.json", c, false),
            "plan.json: 1 error, 2 warnings"
        );
        assert_eq!(
            summary("plan.json", c, true),
            "plan.json: 1 error, 2 warnings (warnings denied)"
        );
        assert_eq!(
            summary("a", Counts::default(), false),
            "a: 0 errors, 0 warnings"
        );
        assert_eq!(
            summary("a", Counts::default(), true),
            "a: 0 errors, 0 warnings"
        );
    }
}
